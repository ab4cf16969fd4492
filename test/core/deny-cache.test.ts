// The deny cache. A hot identifier sending 100× its limit costs Redis at least 95%
// fewer calls, and exactly the same requests are allowed as without the cache, for every policy,
// with mixed costs, refunds and resets.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  type Decision,
  fixedWindow,
  gcra,
  type Limiter,
  type Policy,
  RedisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { seeded } from '../helpers/random.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const START = 1_700_000_000_000;

let server: RedisServer;
let connected: Connected;
before(async () => {
  server = await startRedis();
  connected = await connect('ioredis', server.port);
});
after(async () => {
  await connected.close();
  await server.stop();
});

/** Two limiters on one Redis with one clock: one with the deny cache, one without. */
function pair(policy: () => Policy, name: string, denyCache: true | { maxEntries: number } = true) {
  const clock = { now: START, lastReal: performance.now() };
  const cachedStore = new RedisStore({ client: connected.client });
  const plainStore = new RedisStore({ client: connected.client });
  const make = (store: RedisStore, suffix: string, cache: boolean): Limiter =>
    createLimiter({
      store,
      policy: policy(),
      name: `${name}-${suffix}`,
      clock: () => clock.now,
      timeoutMs: 5000,
      ...(cache ? { denyCache } : {}),
    });
  return {
    clock,
    cachedStore,
    plainStore,
    cached: make(cachedStore, 'cached', true),
    plain: make(plainStore, 'plain', false),
  };
}

// 10 per 10 s. The requests come every 10 simulated ms: the simulated clock must stay ahead of the
// real one, or Redis would expire keys (on real time) before the simulation says they may go.
const WINDOW_MS = 10_000;
const STEP_MS = 10;
const POLICIES: ReadonlyArray<[string, () => Policy]> = [
  ['fixedWindow', () => fixedWindow({ limit: 10, windowMs: WINDOW_MS })],
  ['slidingLog', () => slidingLog({ limit: 10, windowMs: WINDOW_MS })],
  ['slidingWindow', () => slidingWindow({ limit: 10, windowMs: WINDOW_MS })],
  ['tokenBucket', () => tokenBucket({ capacity: 10, refillPerSecond: 1 })],
  ['gcra', () => gcra({ limit: 10, periodMs: WINDOW_MS, burst: 5 })],
];

/**
 * Moves the simulated clock by `stepMs`, or by the real time since the last move if that is more:
 * the simulation never runs slower than Redis's clock, which expires keys.
 */
function advance(clock: { now: number; lastReal: number }, stepMs: number): void {
  const real = performance.now();
  const realMs = Math.ceil(real - clock.lastReal);
  clock.lastReal = real;
  clock.now += Math.max(stepMs, realMs);
}

describe('deny cache', () => {
  for (const [label, policy] of POLICIES) {
    test(`${label}: a hot identifier at 100× its limit costs ≥ 95% fewer Redis calls, same allowed`, async (t) => {
      const { clock, cached, plain, cachedStore, plainStore } = pair(policy, `hot-${label}`);
      // Script calls as Redis counts them: EVALSHA, and EVAL after a NOSCRIPT (the store counts both).
      const commandstats = async (): Promise<number> => {
        const info = String(await connected.command('INFO', 'commandstats'));
        const calls = (command: string): number =>
          Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
        return calls('evalsha') + calls('eval');
      };
      // 100× the limit: 5000 requests, one every 10 ms, against 10 per 10 s.
      let allowedCached = 0;
      let allowedPlain = 0;
      let cachedAnswers = 0;
      const evalshaBefore = await commandstats();
      for (let request = 0; request < 5000; request++) {
        advance(clock, STEP_MS);
        const withCache = await cached.limit('hot');
        const without = await plain.limit('hot');
        assert.equal(
          withCache.allowed,
          without.allowed,
          `at ${clock.now - START} ms: ${JSON.stringify([withCache, without])}`,
        );
        if (withCache.allowed) allowedCached++;
        if (without.allowed) allowedPlain++;
        if (withCache.reason === 'cached') {
          cachedAnswers++;
          assert.ok(withCache.retryAfterMs > 0 && withCache.retryAfterMs <= without.retryAfterMs + 1);
        }
      }
      const evalshaCalls = (await commandstats()) - evalshaBefore;
      assert.equal(allowedCached, allowedPlain);
      assert.equal(plainStore.calls, 5000);
      const saved = 1 - cachedStore.calls / plainStore.calls;
      assert.ok(saved >= 0.95, `saved ${(saved * 100).toFixed(1)}%`);
      // Redis's own count agrees with the store's.
      assert.equal(evalshaCalls, cachedStore.calls + plainStore.calls);
      t.diagnostic(
        `${label}: ${allowedCached} allowed of 5000 with and without the cache; Redis calls ${plainStore.calls} → ${cachedStore.calls} (${(saved * 100).toFixed(1)}% saved, ${cachedAnswers} cached answers)`,
      );
    });

    test(`${label}: random costs, peeks, refunds and resets decide exactly as without the cache`, async () => {
      const { clock, cached, plain, cachedStore, plainStore } = pair(policy, `mixed-${label}`);
      const random = seeded(label.length * 7919);
      const identifiers = ['a', 'b', 'c'];
      for (let step = 0; step < 3000; step++) {
        advance(clock, random.int(0, 30));
        const identifier = random.pick(identifiers);
        const roll = random.next();
        let results: [Decision, Decision] | undefined;
        if (roll < 0.02) {
          await cached.reset(identifier);
          await plain.reset(identifier);
        } else if (roll < 0.06) {
          const amount = random.int(1, 3);
          results = [await cached.refund(identifier, amount), await plain.refund(identifier, amount)];
        } else {
          const operation = roll < 0.12 ? 'peek' : 'limit';
          const cost = random.int(1, 5);
          results = [
            await cached[operation](identifier, { cost }),
            await plain[operation](identifier, { cost }),
          ];
        }
        if (results !== undefined) {
          assert.equal(results[0].allowed, results[1].allowed, `step ${step}: ${JSON.stringify(results)}`);
        }
      }
      assert.ok(cachedStore.calls < plainStore.calls, `${cachedStore.calls} < ${plainStore.calls}`);
    });
  }

  test('a denial for cost 5 does not deny cost 1; cost 5 again is answered without Redis', async () => {
    const { cached, cachedStore } = pair(() => fixedWindow({ limit: 10, windowMs: 60_000 }), 'cost');
    assert.equal((await cached.limit('x', { cost: 7 })).remaining, 3);
    const denied = await cached.limit('x', { cost: 5 });
    assert.equal(denied.allowed, false);
    assert.equal(denied.reason, undefined);
    const calls = cachedStore.calls;
    const again = await cached.limit('x', { cost: 5 });
    assert.deepEqual(again, { ...denied, reason: 'cached' });
    assert.equal((await cached.limit('x', { cost: 6 })).reason, 'cached');
    assert.equal(cachedStore.calls, calls, 'no round trip for cost ≥ 5');
    const small = await cached.limit('x', { cost: 1 });
    assert.deepEqual([small.allowed, small.remaining, small.reason], [true, 2, undefined]);
    assert.equal(cachedStore.calls, calls + 1);
    // A refund may grant more: what was remembered of x is forgotten.
    await cached.refund('x', 5);
    const afterRefund = await cached.limit('x', { cost: 5 });
    assert.deepEqual([afterRefund.allowed, afterRefund.reason], [true, undefined]);
  });

  test('tags: a denial is remembered per identifier and tag, and no identifier can pose as a tagged one', async () => {
    const { cached, cachedStore } = pair(() => fixedWindow({ limit: 1, windowMs: 60_000 }), 'tags');
    await cached.limit('x', { tag: 't1' });
    assert.equal((await cached.limit('x', { tag: 't1' })).reason, undefined);
    assert.equal((await cached.limit('x', { tag: 't1' })).reason, 'cached');
    const calls = cachedStore.calls;
    for (const [identifier, tag] of [
      ['x', undefined],
      ['x', 't2'],
      ['\u0000["t1","x"]', undefined],
    ] as const) {
      const decision = await cached.limit(identifier, tag === undefined ? {} : { tag });
      assert.deepEqual(
        [decision.allowed, decision.reason],
        [true, undefined],
        JSON.stringify([identifier, tag]),
      );
    }
    assert.equal(cachedStore.calls, calls + 3);
  });

  test('bounded: maxEntries identifiers at most, the least recently used out first', async () => {
    const { cached, cachedStore } = pair(() => fixedWindow({ limit: 1, windowMs: 60_000 }), 'lru', {
      maxEntries: 3,
    });
    for (const id of ['a', 'b', 'c', 'd']) {
      await cached.limit(id);
      assert.equal((await cached.limit(id)).reason, undefined, 'denied by Redis, remembered');
    }
    // a was pushed out by d; b, c and d answer from the cache.
    let calls = cachedStore.calls;
    for (const id of ['b', 'c', 'd']) assert.equal((await cached.limit(id)).reason, 'cached');
    assert.equal(cachedStore.calls, calls);
    assert.equal((await cached.limit('a')).reason, undefined);
    assert.equal(cachedStore.calls, calls + 1);
    // Remembering a again pushed out b, the least recently used.
    calls = cachedStore.calls;
    assert.equal((await cached.limit('b')).reason, undefined);
    assert.equal(cachedStore.calls, calls + 1);
  });

  test('a cached denial answers even while Redis is down', async () => {
    const own = await startRedis();
    const client = await connect('node-redis', own.port);
    // The denial is remembered until its window ends: that end must not fall inside the test.
    await clearOfWindowEnd(600_000, 10_000);
    try {
      const limiter = createLimiter({
        store: new RedisStore({ client: client.client }),
        policy: fixedWindow({ limit: 1, windowMs: 600_000 }),
        name: 'down',
        timeoutMs: 10_000,
        denyCache: true,
        onStoreError: 'allow',
      });
      await limiter.limit('hot');
      assert.equal((await limiter.limit('hot')).allowed, false);
      await own.kill('SIGKILL');
      const decision = await limiter.limit('hot');
      assert.deepEqual([decision.allowed, decision.reason], [false, 'cached']);
      const other = await limiter.limit('cold');
      assert.deepEqual(
        [other.allowed, other.reason === 'store-error' || other.reason === 'timeout'],
        [true, true],
      );
    } finally {
      await client.close();
      await own.stop();
    }
  });
});
