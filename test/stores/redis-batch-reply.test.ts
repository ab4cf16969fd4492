// A coalesced call answers each key with a short record (allowed with the batch's shared reset,
// allowed with its own, denied): every form, mixed in one call, decodes to the memory store's decisions.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  type Decision,
  fixedWindow,
  gcra,
  type Limiter,
  MemoryStore,
  type Policy,
  type RedisStore,
  SluiceError,
  slidingLog,
  slidingWindow,
} from '../../src/index.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { openVariant, VARIANTS } from '../helpers/suites.js';

// A busy machine must not turn a slow reply into a timeout decision: these tests compare decisions.
const PATIENT_MS = 60_000;
const NOW = 1_700_000_000_500;

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/** Identifiers and costs decided in one tick: fresh keys, keys with state, keys pushed past their limit. */
const CALLS: ReadonlyArray<readonly [string, number]> = [
  ['a', 1],
  ['b', 3],
  ['a', 2],
  ['c', 5],
  ['b', 5],
  ['d', 1],
  ['c', 5],
  ['a', 4],
];

const POLICIES: ReadonlyArray<() => Policy> = [
  () => fixedWindow({ limit: 8, windowMs: 60_000 }),
  () => gcra({ limit: 10, periodMs: 1000, burst: 8 }),
  () => slidingWindow({ limit: 8, windowMs: 1000 }),
  () => slidingLog({ limit: 8, windowMs: 1000 }),
];

function fire(limiter: Limiter): Promise<Decision[]> {
  return Promise.all(CALLS.map(([identifier, cost]) => limiter.limit(identifier, { cost })));
}

for (const { kind, mode } of VARIANTS) {
  describe(`one coalesced call, ${kind} ${mode}`, () => {
    for (const make of POLICIES) {
      test(`${make().description}: every record decodes to the memory store's decision`, async () => {
        const { connected, store } = await openVariant(kind, mode, server.port, `batch-${kind}-${mode}`);
        try {
          const policy = make();
          // A name per policy: one policy's keys are no other's.
          const options = { policy, name: policy.algorithm, clock: () => NOW, timeoutMs: PATIENT_MS };
          const redis = createLimiter({ ...options, store });
          const memory = createLimiter({ ...options, store: new MemoryStore() });
          // Warm the script (and the library) so that the call below is the only one.
          await redis.peek('warm-up');
          const callsBefore = store.calls;
          const fromRedis = await fire(redis);
          assert.equal(store.calls - callsBefore, 1, 'one script call for the whole tick');
          const fromMemory: Decision[] = [];
          for (const [identifier, cost] of CALLS) fromMemory.push(await memory.limit(identifier, { cost }));
          assert.deepEqual(fromRedis, fromMemory);
          assert.ok(
            fromRedis.some((d) => !d.allowed),
            'some denied',
          );
          if (options.policy.algorithm === 'gcra') {
            // Each key's arrival time differs: allowed keys with a reset of their own, not the shared one.
            const resets = new Set(fromRedis.filter((d) => d.allowed).map((d) => d.resetMs));
            assert.ok(resets.size >= 2, `allowed resets ${[...resets].join(', ')}`);
          }
        } finally {
          await connected.close();
        }
      });
    }
  });
}

/** Calls of `command` the server counted (scripts' inner calls included), from INFO commandstats. */
async function commandCalls(
  connected: { command(...args: string[]): Promise<unknown> },
  command: string,
): Promise<number> {
  const info = String(await connected.command('INFO', 'commandstats'));
  const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
  return Number(match?.[1] ?? 0);
}

describe('keys read ahead with one MGET', () => {
  for (const make of [
    () => gcra({ limit: 10, periodMs: 1000 }),
    () => slidingWindow({ limit: 10, windowMs: 1000 }),
  ]) {
    test(`${make().description}: a batch of fresh identifiers reads them with one MGET and one EXISTS, no GET`, async () => {
      const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'fresh');
      try {
        const policy = make();
        const limiter = createLimiter({ store, policy, name: policy.algorithm, timeoutMs: PATIENT_MS });
        await limiter.limit('warm-up');
        await connected.command('CONFIG', 'RESETSTAT');
        const calls = store.calls;
        const ids = Array.from({ length: 20 }, (_, i) => `fresh-${i}`);
        const decisions = await Promise.all(ids.map((id) => limiter.limit(id)));
        assert.equal(store.calls - calls, 1, 'one batch');
        assert.ok(decisions.every((d) => d.allowed));
        assert.equal(await commandCalls(connected, 'mget'), 1);
        assert.equal(await commandCalls(connected, 'exists'), 1);
        assert.equal(await commandCalls(connected, 'get'), 0);
      } finally {
        await connected.close();
      }
    });
  }
  for (const make of [
    () => gcra({ limit: 10, periodMs: 1000 }),
    () => slidingWindow({ limit: 10, windowMs: 1000 }),
  ]) {
    test(`${make().description}: a key of another type in a batch still fails with WRONGTYPE, and is left as it was`, async () => {
      const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'ahead');
      try {
        const policy = make();
        const limiter = createLimiter({ store, policy, name: policy.algorithm, timeoutMs: PATIENT_MS });
        await limiter.limit('warm-up');
        const key = store.keyFor(policy.algorithm, 'hash');
        await connected.command('HSET', key, 'field', 'kept');
        const request = (identifier: string) =>
          ({
            policy,
            name: policy.algorithm,
            identifier,
            operation: 'limit',
            cost: 1,
            now: undefined,
          }) as const;
        const calls = store.calls;
        // MGET answers nil for a hash as for a missing key: the key is read again, and GET refuses it.
        const results = await Promise.allSettled(
          ['one', 'hash', 'two'].map((id) => store.decide(request(id))),
        );
        assert.equal(store.calls - calls, 1, 'one batch');
        for (const result of results) {
          assert.equal(result.status, 'rejected');
          const error = (result as PromiseRejectedResult).reason;
          assert.ok(error instanceof SluiceError);
          assert.match(error.message, /WRONGTYPE/);
        }
        assert.deepEqual(await connected.command('HGETALL', key), ['field', 'kept']);
      } finally {
        await connected.close();
      }
    });
  }
});

describe('a tick with several policies and operations', () => {
  test('one call per policy, a new one when the operation changes; each key in the order of its requests', async () => {
    const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'mixed');
    try {
      const memoryStore = new MemoryStore();
      const make = (store: RedisStore | MemoryStore) => ({
        window: createLimiter({
          store,
          policy: fixedWindow({ limit: 3, windowMs: 60_000 }),
          name: 'w',
          clock: () => NOW,
          timeoutMs: PATIENT_MS,
        }),
        bucket: createLimiter({
          store,
          policy: gcra({ limit: 4, periodMs: 1000 }),
          name: 'g',
          clock: () => NOW,
          timeoutMs: PATIENT_MS,
        }),
      });
      const redis = make(store);
      const memory = make(memoryStore);
      await redis.window.peek('warm-up');
      await redis.bucket.peek('warm-up');
      const tick = (l: ReturnType<typeof make>) => [
        () => l.window.limit('x'),
        () => l.bucket.limit('x', { cost: 2 }),
        () => l.window.limit('x'),
        () => l.bucket.peek('x', { cost: 3 }),
        () => l.window.limit('y'),
        () => l.window.limit('x'),
        () => l.window.limit('x'),
      ];
      const calls = store.calls;
      const fromRedis = await Promise.all(tick(redis).map((call) => call()));
      // The window's five limits share one call; the bucket's limit and its peek need two.
      assert.equal(store.calls - calls, 3);
      const fromMemory: Decision[] = [];
      for (const call of tick(memory)) fromMemory.push(await call());
      assert.deepEqual(fromRedis, fromMemory);
      assert.deepEqual(
        fromRedis.map((d) => d.allowed),
        [true, true, true, false, true, true, false],
      );
    } finally {
      await connected.close();
    }
  });
});

describe('records too large to pack', () => {
  test('remaining units of 2^20 and more: text records beside packed ones, each the memory store decision', async () => {
    const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'large');
    try {
      const policy = gcra({ limit: 2_000_000, periodMs: 1000 });
      const options = { policy, name: 'large', clock: () => NOW, timeoutMs: PATIENT_MS };
      const redis = createLimiter({ ...options, store });
      const memory = createLimiter({ ...options, store: new MemoryStore() });
      await redis.peek('warm-up');
      // 'a' keeps over 2^20 units (text), 'b' fewer (packed); 'a' then spends nearly all; 'b' is refused.
      const calls: ReadonlyArray<readonly [string, number]> = [
        ['a', 1],
        ['b', 1_500_000],
        ['a', 1_999_999],
        ['b', 600_000],
      ];
      const before = store.calls;
      const fromRedis = await Promise.all(calls.map(([id, cost]) => redis.limit(id, { cost })));
      assert.equal(store.calls - before, 1, 'one script call');
      const fromMemory: Decision[] = [];
      for (const [id, cost] of calls) fromMemory.push(await memory.limit(id, { cost }));
      assert.deepEqual(fromRedis, fromMemory);
      assert.deepEqual(
        fromRedis.map((d) => [d.allowed, d.remaining]),
        [
          [true, 2_000_001],
          [true, 500_002],
          [true, 2],
          [false, 500_002],
        ],
      );
    } finally {
      await connected.close();
    }
  });
});
