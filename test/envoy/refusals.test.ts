// A bad Envoy config at start: `sluice serve --envoy` exits 2 naming the file, the line and the reason.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { FIXTURES, ROOT } from '../helpers/envoy/support.js';

const REFUSALS: readonly { file: string; line: number; reason: string }[] = [
  { file: 'bad_limit_unit.yaml', line: 6, reason: "invalid rate limit unit 'foo'" },
  { file: 'bad_yaml.yaml', line: 2, reason: 'error loading config file: Missing closing' },
  {
    file: 'duplicate_key.yaml',
    line: 6,
    reason: "duplicate descriptor composite key 'test-domain.key1_value1'",
  },
  { file: 'empty_domain.yaml', line: 1, reason: 'config file cannot have empty domain' },
  { file: 'empty_key.yaml', line: 3, reason: 'descriptor has empty key' },
  { file: 'misspelled_key.yaml', line: 5, reason: "config error, unknown key 'ratelimit'" },
  { file: 'misspelled_key2.yaml', line: 7, reason: "config error, unknown key 'requestsperunit'" },
  {
    file: 'non_map_list.yaml',
    line: 3,
    reason: 'config error, yaml file contains list of type other than map: a',
  },
  { file: 'non_string_key.yaml', line: 1, reason: 'config error, key is not of type string: 0.25' },
  { file: 'replaces_empty.yaml', line: 10, reason: 'should not have an empty replaces entry' },
  { file: 'replaces_self.yaml', line: 10, reason: 'replaces should not contain name of same descriptor' },
  { file: 'unlimited_with_unit.yaml', line: 6, reason: 'should not specify rate limit unit when unlimited' },
  { file: 'unit_and_window.yaml', line: 6, reason: "give either 'unit' or 'window', not both" },
  { file: 'charge_unlimited.yaml', line: 6, reason: "should not specify 'charge_over_limit' when unlimited" },
  { file: 'bad_window.yaml', line: 5, reason: "invalid window 'ninety seconds'" },
  { file: 'bad_algorithm.yaml', line: 5, reason: "invalid algorithm 'leakyBucket'" },
  {
    file: 'burst_without_bucket.yaml',
    line: 8,
    reason: "'burst' applies to tokenBucket and gcra, not slidingWindow",
  },
  {
    file: 'negative_limit.yaml',
    line: 6,
    reason: "config error, expected 'requests_per_unit' to be a whole number",
  },
  {
    file: join('duplicate_domain', 'b.yaml'),
    line: 2,
    reason: "duplicate domain 'test-domain' in config file",
  },
];

describe('sluice serve --envoy refuses a bad config at start', { concurrency: 4 }, () => {
  for (const { file, line, reason } of REFUSALS) {
    test(`${file}: line ${line}, ${reason}`, async () => {
      // The duplicate domain is a directory of two files; every other fixture is one file.
      const path = file.includes('duplicate_domain')
        ? join(FIXTURES, 'refusals', 'duplicate_domain')
        : join(FIXTURES, 'refusals', file);
      const result = await runCli(['serve', '--port', '0', '--grpc-port', '0', '--envoy', path], {
        cwd: ROOT,
      });
      assert.equal(result.code, 2, result.stderr);
      const first = result.stderr.split('\n')[0] ?? '';
      assert.ok(
        first.startsWith(`sluice serve: ${join(FIXTURES, 'refusals', file)}:${line}: ${reason}`),
        first,
      );
      assert.doesNotMatch(result.stdout, /listening/);
    });
  }

  test('a path that does not exist is named', async () => {
    const result = await runCli(['serve', '--port', '0', '--envoy', join(FIXTURES, 'nowhere')], {
      cwd: ROOT,
    });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /The Envoy config .*nowhere does not exist\./);
  });

  test('the gRPC flags without --envoy are refused', async () => {
    const result = await runCli(['serve', '--port', '0', '--grpc-port', '9000'], { cwd: ROOT });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /`--grpc-port` applies to the Envoy service: give `--envoy <path>` too\./);
  });
});
