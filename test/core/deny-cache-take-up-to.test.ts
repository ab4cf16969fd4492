// takeUpTo and the deny cache, counted in store calls on Redis: a refused takeUpTo (not even one unit free) is
// remembered at cost 1 and answers later calls of any size without a round trip; a denial remembered for a larger
// cost says nothing of one unit, so a takeUpTo after it still asks the store and is granted what is free; and a mixed
// sequence is granted exactly the same with and without the cache.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  fixedWindow,
  gcra,
  type Limiter,
  type Policy,
  RedisStore,
  slidingLog,
  slidingWindow,
} from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { seeded } from '../helpers/random.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { unique } from '../helpers/suites.js';

const T0 = 1_700_000_000_000;

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

/** A limiter on its own RedisStore (whose `calls` count its round trips), at `clock.now`. */
function limiterOn(policy: Policy, clock: { now: number }, denyCache: boolean) {
  const store = new RedisStore({ client: connected.client });
  const limiter = createLimiter({
    store,
    policy,
    name: unique('deny-take'),
    clock: () => clock.now,
    timeoutMs: 60_000,
    ...(denyCache ? { denyCache: true } : {}),
  });
  return { store, limiter };
}

describe('takeUpTo and the deny cache, on Redis', () => {
  test('a refused takeUpTo is remembered at cost 1: later takeUpTo and limit calls cost no round trip', async () => {
    const clock = { now: T0 };
    const { store, limiter } = limiterOn(fixedWindow({ limit: 10, windowMs: 3_600_000 }), clock, true);
    assert.equal((await limiter.limit('a', { cost: 10 })).allowed, true);
    const refused = await limiter.takeUpTo('a', 5);
    assert.deepEqual([refused.allowed, refused.granted, refused.reason], [false, 0, undefined]);
    const calls = store.calls;
    for (let i = 0; i < 10; i++) {
      const again = await limiter.takeUpTo('a', 1 + (i % 5));
      assert.deepEqual([again.allowed, again.granted, again.reason], [false, 0, 'cached']);
      assert.ok(again.retryAfterMs > 0 && again.retryAfterMs <= refused.retryAfterMs);
    }
    // Not even one unit is free: a limit of any cost is answered too.
    assert.equal((await limiter.limit('a', { cost: 3 })).reason, 'cached');
    assert.equal(store.calls, calls, 'no round trip after the refusal');
    // Another identifier is its own.
    assert.equal((await limiter.takeUpTo('b', 5)).granted, 5);
    assert.equal(store.calls, calls + 1);
  });

  test('a limit of 1 refused answers a takeUpTo from the cache', async () => {
    const clock = { now: T0 };
    const { store, limiter } = limiterOn(gcra({ limit: 10, periodMs: 3_600_000, burst: 10 }), clock, true);
    assert.equal((await limiter.limit('a', { cost: 10 })).allowed, true);
    assert.equal((await limiter.limit('a', { cost: 1 })).allowed, false);
    const calls = store.calls;
    const taken = await limiter.takeUpTo('a', 4);
    assert.deepEqual([taken.allowed, taken.granted, taken.reason], [false, 0, 'cached']);
    assert.equal(store.calls, calls);
  });

  test('a denial remembered for cost 5 says nothing of one unit: takeUpTo asks the store and takes what is free', async () => {
    const clock = { now: T0 };
    const { store, limiter } = limiterOn(fixedWindow({ limit: 10, windowMs: 3_600_000 }), clock, true);
    assert.equal((await limiter.limit('a', { cost: 7 })).allowed, true);
    assert.equal((await limiter.limit('a', { cost: 5 })).allowed, false);
    // The denial for 5 answers 5 and more from the cache…
    let calls = store.calls;
    assert.equal((await limiter.limit('a', { cost: 5 })).reason, 'cached');
    assert.equal(store.calls, calls);
    // …but not a take of up to 5, which needs one unit and finds 3.
    const taken = await limiter.takeUpTo('a', 5);
    assert.deepEqual([taken.allowed, taken.granted, taken.remaining], [true, 3, 0]);
    assert.equal(store.calls, calls + 1);
    // Now nothing is free: the next refusal is remembered at cost 1 and answers the one after.
    calls = store.calls;
    assert.equal((await limiter.takeUpTo('a', 2)).granted, 0);
    assert.equal(store.calls, calls + 1);
    assert.equal((await limiter.takeUpTo('a', 2)).reason, 'cached');
    assert.equal(store.calls, calls + 1);
  });

  for (const make of [
    () => fixedWindow({ limit: 10, windowMs: 2_000 }),
    () => slidingLog({ limit: 10, windowMs: 2_000 }),
    () => slidingWindow({ limit: 10, windowMs: 2_000 }),
    () => gcra({ limit: 10, periodMs: 2_000, burst: 5 }),
  ]) {
    const policy = make();
    test(`${policy.description}: 1,500 mixed limit and takeUpTo calls, granted the same with and without the cache, in fewer round trips`, async () => {
      const random = seeded(policy.limit * 31 + policy.windowMs);
      // Simulated time that never runs behind Redis's own (which expires keys).
      const clock = { now: T0, lastReal: performance.now() };
      const cached = limiterOn(make(), clock, true);
      const plain = limiterOn(make(), clock, false);
      let cachedAnswers = 0;
      for (let i = 0; i < 1500; i++) {
        const real = performance.now();
        clock.now += Math.max(random.int(0, 8), Math.ceil(real - clock.lastReal));
        clock.lastReal = real;
        const identifier = random.pick(['a', 'b']);
        const amount = random.int(1, Math.min(6, policy.maxCost));
        const take = random.next() < 0.6;
        const call = (limiter: Limiter) =>
          take ? limiter.takeUpTo(identifier, amount) : limiter.limit(identifier, { cost: amount });
        const withCache = await call(cached.limiter);
        const without = await call(plain.limiter);
        assert.equal(
          withCache.allowed,
          without.allowed,
          `call ${i}: ${take ? 'takeUpTo' : 'limit'}(${amount})`,
        );
        if (take)
          assert.equal(
            (withCache as unknown as { granted: number }).granted,
            (without as unknown as { granted: number }).granted,
          );
        if (withCache.reason === 'cached') cachedAnswers++;
      }
      assert.equal(plain.store.calls, 1500);
      assert.equal(cached.store.calls, 1500 - cachedAnswers);
      assert.ok(cachedAnswers > 100, `${cachedAnswers} answered by the cache`);
      console.log(
        `${policy.description}: ${plain.store.calls} → ${cached.store.calls} round trips, same grants`,
      );
    });
  }
});
