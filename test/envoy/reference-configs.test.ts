// Every config file envoyproxy/ratelimit ships (its tests, its examples, its README) read as `sluice serve --envoy` reads
// it: the files the reference loads, sluice loads; the ones it refuses, sluice refuses with the reference's words.
import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { buildConfig, type EnvoyConfig } from '../../packages/server/src/envoy/config.js';
import { readConfigFiles } from '../../packages/server/src/envoy/reload.js';
import { FIXTURES } from '../helpers/envoy/support.js';

const REFERENCE = join(FIXTURES, 'reference');

/** The reference's refusals (its config tests' expected messages), with the line sluice names. */
const REFUSED: Readonly<Record<string, { line: number; reason: string }>> = {
  'test/config/bad_limit_unit.yaml': { line: 6, reason: "invalid rate limit unit 'foo'" },
  // The reference's YAML parser words its errors differently ("found unexpected end of stream").
  'test/config/bad_yaml.yaml': { line: 2, reason: 'error loading config file: ' },
  'test/config/duplicate_key.yaml': {
    line: 6,
    reason: "duplicate descriptor composite key 'test-domain.key1_value1'",
  },
  'test/config/empty_domain.yaml': { line: 1, reason: 'config file cannot have empty domain' },
  'test/config/empty_key.yaml': { line: 3, reason: 'descriptor has empty key' },
  'test/config/misspelled_key.yaml': { line: 5, reason: "config error, unknown key 'ratelimit'" },
  'test/config/misspelled_key2.yaml': { line: 7, reason: "config error, unknown key 'requestsperunit'" },
  'test/config/non_map_list.yaml': {
    line: 3,
    reason: 'config error, yaml file contains list of type other than map: a',
  },
  'test/config/non_string_key.yaml': { line: 1, reason: 'config error, key is not of type string: 0.25' },
  'test/config/replaces_empty.yaml': { line: 10, reason: 'should not have an empty replaces entry' },
  'test/config/replaces_self.yaml': {
    line: 10,
    reason: 'replaces should not contain name of same descriptor',
  },
  'test/config/unlimited_with_unit.yaml': {
    line: 6,
    reason: 'should not specify rate limit unit when unlimited',
  },
};

function yamlFiles(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return yamlFiles(path);
      return /\.ya?ml$/.test(name) ? [path] : [];
    });
}

function load(path: string): EnvoyConfig {
  return buildConfig(readConfigFiles(path).sources);
}

describe('the reference’s config files', () => {
  const files = yamlFiles(REFERENCE);

  test('all 42 are here: 26 from its tests and examples, 16 from its README', () => {
    assert.equal(files.length, 42);
    assert.equal(files.filter((file) => file.includes('readme-examples')).length, 16);
  });

  for (const file of files) {
    const name = relative(REFERENCE, file);
    const refused = REFUSED[name];
    if (refused === undefined) {
      test(`${name} loads`, () => {
        const config = load(file);
        assert.equal(config.domains.size, 1);
      });
    } else {
      test(`${name} is refused: ${refused.reason}`, () => {
        assert.throws(
          () => load(file),
          (error: Error) => error.message.startsWith(`${file}:${refused.line}: ${refused.reason}`),
        );
      });
    }
  }

  test('the example directory loads whole, quota mode and metadata included', () => {
    const config = load(join(REFERENCE, 'examples', 'ratelimit', 'config'));
    assert.deepEqual([...config.domains.keys()].sort(), ['mongo_cps', 'rl']);
    const services = config.rules.filter((rule) => rule.path.startsWith('rl.service_'));
    assert.deepEqual(
      services.map((rule) => [rule.path, rule.quotaMode, rule.metadata]),
      [
        ['rl.service_service_1', true, { service_with_quota: { name: 'service_1' } }],
        ['rl.service_service_2', true, { service_with_quota: { name: 'service_2' } }],
      ],
    );
  });

  test('the integration directory loads whole', () => {
    const config = load(join(REFERENCE, 'test', 'integration', 'runtime', 'current', 'ratelimit', 'config'));
    assert.equal(config.domains.size, 3);
  });

  test('metadata keeps its nesting; a descriptor without it has none', () => {
    const config = load(join(REFERENCE, 'test', 'config', 'metadata.yaml'));
    const byPath = new Map(config.rules.map((rule) => [rule.path, rule.metadata]));
    assert.deepEqual(byPath.get('test-domain.key1_value1.subkey1'), { name: 'service_1' });
    assert.deepEqual(byPath.get('test-domain.key2'), { service_with_quota: { name: 'service_2' } });
    assert.equal(byPath.get('test-domain.key1_value1.subkey1_subvalue1'), undefined);
  });

  test('a domain in two files is refused, as the reference does without MERGE_DOMAIN_CONFIG', () => {
    const sources = [
      ...readConfigFiles(join(REFERENCE, 'test', 'config', 'basic_config.yaml')).sources,
      ...readConfigFiles(join(REFERENCE, 'test', 'config', 'duplicate_domain.yaml')).sources,
    ];
    assert.throws(
      () => buildConfig(sources),
      /duplicate domain 'test-domain' in config file \(also in .*basic_config\.yaml\)\. See /,
    );
  });
});
