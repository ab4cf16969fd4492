// Which rule a descriptor selects, rule by rule, through a real gRPC client and a real server process.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import {
  type Entry,
  type EnvoyServe,
  FIXTURES,
  MINUTE_MS,
  OK,
  OVER_LIMIT,
  startEnvoyServe,
  UNIT,
} from '../helpers/envoy/support.js';
import { clearOfWindowEnd } from '../helpers/window.js';

// Counts are read within one fixed window: no test starts in the last seconds of a minute's.
beforeEach(() => clearOfWindowEnd(MINUTE_MS, 3_000));

/** What a descriptor is expected to get: a limit (requests per unit, unit, name), unlimited, or nothing. */
type Expected = { rpu: number; unit: number; name?: string } | 'unlimited' | 'none';

const TABLE: readonly { what: string; entries: Entry[]; expected: Expected }[] = [
  {
    what: 'a key/value with no limit of its own',
    entries: [{ key: 'key1', value: 'value1' }],
    expected: 'none',
  },
  { what: 'a value the config does not know', entries: [{ key: 'key1', value: 'other' }], expected: 'none' },
  {
    what: 'a nested key alone',
    entries: [
      { key: 'key1', value: 'value1' },
      { key: 'subkey1', value: 'any' },
    ],
    expected: { rpu: 5, unit: UNIT.SECOND },
  },
  {
    what: 'a nested key_value before the key alone',
    entries: [
      { key: 'key1', value: 'value1' },
      { key: 'subkey1', value: 'subvalue1' },
    ],
    expected: { rpu: 10, unit: UNIT.SECOND },
  },
  {
    what: 'a top-level key alone',
    entries: [{ key: 'key2', value: 'anything' }],
    expected: { rpu: 20, unit: UNIT.MINUTE },
  },
  {
    what: 'a top-level key_value',
    entries: [{ key: 'key2', value: 'value2' }],
    expected: { rpu: 30, unit: UNIT.MINUTE },
  },
  {
    what: 'a key_value without a limit exempts that value',
    entries: [{ key: 'key2', value: 'value3' }],
    expected: 'none',
  },
  {
    what: 'more entries than the config has levels',
    entries: [
      { key: 'key2', value: 'value2' },
      { key: 'subkey', value: 'subvalue' },
    ],
    expected: 'none',
  },
  {
    what: 'a nested value the config does not know',
    entries: [
      { key: 'key5', value: 'value5' },
      { key: 'subkey5', value: 'other' },
    ],
    expected: 'none',
  },
  {
    what: 'a parent with its own limit',
    entries: [{ key: 'key5', value: 'value5' }],
    expected: { rpu: 15, unit: UNIT.DAY },
  },
  {
    what: 'its child',
    entries: [
      { key: 'key5', value: 'value5' },
      { key: 'subkey5', value: 'subvalue5' },
    ],
    expected: { rpu: 25, unit: UNIT.DAY },
  },
  {
    what: 'a named limit',
    entries: [{ key: 'key4', value: 'alone' }],
    expected: { rpu: 1, unit: UNIT.DAY, name: 'key4_rate_limit' },
  },
  { what: 'an unlimited rule', entries: [{ key: 'key6', value: 'x' }], expected: 'unlimited' },
  {
    what: 'a trailing wildcard',
    entries: [{ key: 'wild', value: 'foo1' }],
    expected: { rpu: 20, unit: UNIT.MINUTE },
  },
  { what: 'a trailing wildcard, no match', entries: [{ key: 'wild', value: 'bar' }], expected: 'none' },
  {
    what: 'a middle wildcard',
    entries: [{ key: 'midWild', value: 'bar123b' }],
    expected: { rpu: 21, unit: UNIT.MINUTE },
  },
  {
    what: 'a middle wildcard matching nothing',
    entries: [{ key: 'midWild', value: 'barb' }],
    expected: { rpu: 21, unit: UNIT.MINUTE },
  },
  { what: 'a middle wildcard, no suffix', entries: [{ key: 'midWild', value: 'bara' }], expected: 'none' },
  { what: 'a middle wildcard, no prefix', entries: [{ key: 'midWild', value: 'xbarb' }], expected: 'none' },
  {
    what: 'several wildcards in order',
    entries: [{ key: 'multiWild', value: 'foo1bar2baz' }],
    expected: { rpu: 10, unit: UNIT.MINUTE },
  },
  {
    what: 'several wildcards, one part missing',
    entries: [{ key: 'multiWild', value: 'foo1baz' }],
    expected: 'none',
  },
  {
    what: 'a nested wildcard',
    entries: [
      { key: 'nestedWild', value: 'val1' },
      { key: 'wild', value: 'goo2' },
    ],
    expected: { rpu: 22, unit: UNIT.MINUTE },
  },
  {
    what: 'a unit written in mixed case, WEEK',
    entries: [{ key: 'weekly', value: 'x' }],
    expected: { rpu: 7, unit: UNIT.WEEK },
  },
];

describe('matching, rule by rule', () => {
  let serve: EnvoyServe;
  before(async () => {
    serve = await startEnvoyServe(join(FIXTURES, 'matching.yaml'));
  });
  after(async () => {
    await serve.stop();
  });

  for (const { what, entries, expected } of TABLE) {
    test(`${what}: ${entries.map((e) => `${e.key}=${e.value}`).join(', ')}`, async () => {
      const response = await serve.client.shouldRateLimit({
        domain: 'test-domain',
        descriptors: [{ entries }],
      });
      assert.equal(response.overall_code, OK);
      const status = response.statuses[0];
      assert.equal(status?.code, OK);
      if (expected === 'none') {
        assert.equal(status?.current_limit, null);
        assert.equal(status?.limit_remaining, 0);
      } else if (expected === 'unlimited') {
        assert.equal(status?.current_limit, null);
        assert.equal(status?.limit_remaining, 4_294_967_295);
      } else {
        assert.deepEqual(status?.current_limit, {
          name: expected.name ?? '',
          requests_per_unit: expected.rpu,
          unit: expected.unit,
        });
        assert.equal(status?.limit_remaining, expected.rpu - 1);
      }
    });
  }

  test('values matched by one wildcard count apart; the limit counts per value', async () => {
    const first = await serve.client.shouldRateLimit({
      domain: 'test-domain',
      descriptors: [{ entries: [{ key: 'wild', value: 'fooA' }] }],
    });
    const second = await serve.client.shouldRateLimit({
      domain: 'test-domain',
      descriptors: [{ entries: [{ key: 'wild', value: 'fooB' }] }],
    });
    assert.equal(first.statuses[0]?.limit_remaining, 19);
    assert.equal(second.statuses[0]?.limit_remaining, 19);
    const third = await serve.client.shouldRateLimit({
      domain: 'test-domain',
      descriptors: [{ entries: [{ key: 'wild', value: 'fooA' }] }],
    });
    assert.equal(third.statuses[0]?.limit_remaining, 18);
  });

  test('one per hour: the second call is over', async () => {
    const request = { domain: 'test-domain', descriptors: [{ entries: [{ key: 'key3', value: 'h' }] }] };
    assert.equal((await serve.client.shouldRateLimit(request)).overall_code, OK);
    const second = await serve.client.shouldRateLimit(request);
    assert.equal(second.overall_code, OVER_LIMIT);
    assert.equal(second.statuses[0]?.code, OVER_LIMIT);
    assert.equal(second.statuses[0]?.limit_remaining, 0);
    assert.deepEqual(second.statuses[0]?.current_limit, { name: '', requests_per_unit: 1, unit: UNIT.HOUR });
  });

  test('shadow mode: over the limit, answered OK', async () => {
    const request = { domain: 'test-domain', descriptors: [{ entries: [{ key: 'shadowed', value: 's' }] }] };
    assert.equal((await serve.client.shouldRateLimit(request)).statuses[0]?.limit_remaining, 0);
    const over = await serve.client.shouldRateLimit(request);
    assert.equal(over.overall_code, OK);
    assert.equal(over.statuses[0]?.code, OK);
    assert.equal(over.statuses[0]?.current_limit?.requests_per_unit, 1);
  });

  test('replaces: a matched limit named in another matched limit does not apply', async () => {
    const response = await serve.client.shouldRateLimit({
      domain: 'test-domain',
      descriptors: [
        { entries: [{ key: 'key4', value: 'replaced' }] },
        { entries: [{ key: 'replacer', value: 'r' }] },
      ],
    });
    assert.equal(response.statuses[0]?.current_limit, null);
    assert.equal(response.statuses[1]?.current_limit?.requests_per_unit, 40);
    // Replaced, the one-per-day limit took nothing: alone, it still grants its one request.
    const alone = await serve.client.shouldRateLimit({
      domain: 'test-domain',
      descriptors: [{ entries: [{ key: 'key4', value: 'replaced' }] }],
    });
    assert.equal(alone.overall_code, OK);
    assert.equal(alone.statuses[0]?.limit_remaining, 0);
  });

  test('an unknown domain limits nothing', async () => {
    const response = await serve.client.shouldRateLimit({
      domain: 'nowhere',
      descriptors: [{ entries: [{ key: 'key3', value: 'x' }] }],
    });
    assert.equal(response.overall_code, OK);
    assert.equal(response.statuses[0]?.current_limit, null);
  });
});
