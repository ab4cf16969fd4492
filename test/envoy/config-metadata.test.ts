// Reading `quota_mode` and `metadata` (no server): metadata keeps any YAML map as JSON, its keys free; the merge
// leaves the config untouched; refusals name the line, and a message ending in ")" still ends as a sentence.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildConfig } from '../../packages/server/src/envoy/config.js';
import {
  dynamicMetadata,
  type MetadataObject,
  mergeMetadata,
} from '../../packages/server/src/envoy/metadata.js';

function load(text: string) {
  return buildConfig([{ file: 'edge.yaml', text }]);
}

describe('quota_mode and metadata in config', () => {
  test('metadata is any map: nested maps, lists, numbers, null, and keys that are not strings', () => {
    const config = load(`domain: edge
descriptors:
  - key: api_key
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 5 }
    metadata:
      1: one
      route: { weight: 2.5, backup: null, hosts: [a, b] }
`);
    const rule = config.rules[0];
    assert.equal(rule?.quotaMode, true);
    assert.deepEqual(rule?.metadata, { 1: 'one', route: { weight: 2.5, backup: null, hosts: ['a', 'b'] } });
  });

  test('a key that is not a string is still refused outside metadata', () => {
    assert.throws(
      () => load('domain: edge\ndescriptors:\n  - key: a\n    2: b\n'),
      /edge\.yaml:4: config error, key is not of type string: 2\. See /,
    );
  });

  test('metadata that is not a map is refused at its line', () => {
    assert.throws(
      () => load('domain: edge\ndescriptors:\n  - key: a\n    metadata: 5\n'),
      /edge\.yaml:4: config error, expected 'metadata' to be a map, got 5\. See /,
    );
  });

  test('an empty metadata map is none, as the reference reads it', () => {
    assert.equal(load('domain: edge\ndescriptors:\n  - key: a\n    metadata: {}\n').rules.length, 0);
    const config = load(
      'domain: edge\ndescriptors:\n  - key: a\n    metadata: {}\n    rate_limit: { unit: second, requests_per_unit: 1 }\n',
    );
    assert.equal(config.rules[0]?.metadata, undefined);
  });

  test('merging keeps the first value, merges maps key by key, and writes to neither input', () => {
    const first: MetadataObject = { route: { primary: 'a' }, weight: 1 };
    const second: MetadataObject = { route: { primary: 'b', backup: 'b' }, weight: 2, extra: [1] };
    const snapshot = JSON.stringify([first, second]);
    const merged = {};
    mergeMetadata(merged, first);
    mergeMetadata(merged, second);
    assert.deepEqual(merged, { route: { primary: 'a', backup: 'b' }, weight: 1, extra: [1] });
    assert.equal(JSON.stringify([first, second]), snapshot);
    assert.deepEqual(
      dynamicMetadata(
        'edge',
        [
          {
            entries: [{ key: 'k', value: 'v' }],
            limit: { requests_per_unit: 10, unit: 1 },
            hits_addend: { value: 0 },
          },
        ],
        0,
        [],
      ),
      {
        domain: 'edge',
        descriptors: [{ entries: ['k=v'], limit: 'requests_per_unit:10 unit:SECOND', hitsAddend: 0 }],
      },
    );
  });
});
