// What a concurrency policy's leases do, on Redis and in memory alike: slots held and freed, expiry
// by the deciding clock, fencing tokens, and the calls it refuses.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  concurrency,
  createLimiter,
  type Decision,
  gcra,
  type Lease,
  type Limiter,
  MemoryStore,
  RedisStore,
  type Store,
} from '../../src/index.js';
import { EXACT, redisForSuite, unique } from '../helpers/suites.js';

const suite = redisForSuite();

const T0 = 1_700_000_000_000;

function leaseOf(decision: Decision): Lease {
  assert.ok(decision.lease, `expected a lease, got ${JSON.stringify(decision)}`);
  return decision.lease;
}

const STORES: ReadonlyArray<[string, () => Store]> = [
  ['memory', () => new MemoryStore()],
  ['redis', () => new RedisStore({ client: suite.redis.client })],
];

for (const [kind, makeStore] of STORES) {
  describe(`concurrency() leases (${kind})`, () => {
    let now = T0;
    const clock = () => now;
    const limiterOf = (limit: number, leaseMs: number): Limiter =>
      createLimiter({
        store: makeStore(),
        policy: concurrency({ limit, leaseMs }),
        name: unique('lease'),
        clock,
        ...EXACT,
      });

    test('slots are held until released; a refused acquisition takes nothing and waits for the soonest expiry', async () => {
      now = T0;
      const limiter = limiterOf(2, 1000);
      const first = await limiter.limit('u');
      assert.deepEqual(
        { ...first, lease: { ...leaseOf(first), id: 'x' } },
        {
          allowed: true,
          limit: 2,
          remaining: 1,
          resetMs: 1000,
          retryAfterMs: 0,
          lease: { id: 'x', token: T0 * 1000, expiresAt: T0 + 1000 },
        },
      );
      now += 100;
      const second = await limiter.limit('u');
      assert.equal(second.remaining, 0);
      assert.ok(leaseOf(second).token > leaseOf(first).token);
      assert.notEqual(leaseOf(second).id, leaseOf(first).id);
      now += 100;
      const refused = await limiter.limit('u');
      assert.deepEqual(refused, { allowed: false, limit: 2, remaining: 0, resetMs: 900, retryAfterMs: 800 });
      const released = await limiter.release('u', leaseOf(first));
      assert.deepEqual(released, {
        allowed: true,
        limit: 2,
        remaining: 1,
        resetMs: 900,
        retryAfterMs: 0,
        released: true,
      });
      const again = await limiter.release('u', leaseOf(first));
      assert.equal(again.released, false);
      assert.equal(again.remaining, 1);
      assert.equal((await limiter.limit('u')).allowed, true);
    });

    test('a lease lapses at leaseMs, not a millisecond before, and the call that finds it says so', async () => {
      now = T0;
      const limiter = limiterOf(3, 500);
      const held = await limiter.limit('u', { cost: 3 });
      assert.equal(held.remaining, 0);
      now = T0 + 499;
      assert.deepEqual(await limiter.peek('u'), {
        allowed: false,
        limit: 3,
        remaining: 0,
        resetMs: 1,
        retryAfterMs: 1,
      });
      assert.equal((await limiter.limit('u')).allowed, false);
      now = T0 + 500;
      const after = await limiter.limit('u', { cost: 2 });
      assert.equal(after.allowed, true);
      assert.equal(after.remaining, 1);
      assert.equal(after.reclaimed, 3);
      // Released after it lapsed: nothing changes, and the call says so.
      const late = await limiter.release('u', leaseOf(held));
      assert.equal(late.released, false);
      assert.equal(late.remaining, 1);
    });

    test('cost takes several slots and release frees them all', async () => {
      now = T0;
      const limiter = limiterOf(10, 1000);
      const big = await limiter.limit('u', { cost: 7 });
      assert.equal(big.remaining, 3);
      assert.deepEqual(await limiter.limit('u', { cost: 4 }), {
        allowed: false,
        limit: 10,
        remaining: 3,
        resetMs: 1000,
        retryAfterMs: 1000,
      });
      assert.equal((await limiter.release('u', leaseOf(big))).remaining, 10);
      assert.equal((await limiter.limit('u', { cost: 10 })).remaining, 0);
    });

    test('extend renews a live lease from now; an expired or released one is not extended', async () => {
      now = T0;
      const limiter = limiterOf(1, 1000);
      const held = leaseOf(await limiter.limit('u'));
      now = T0 + 900;
      const extended = await limiter.extend('u', held);
      assert.equal(extended.extended, true);
      assert.deepEqual(extended.lease, { ...held, expiresAt: T0 + 1900 });
      assert.equal((await limiter.extend('u', held, 300)).lease?.expiresAt, T0 + 1200);
      await assert.rejects(limiter.extend('u', held, 1001), { code: 'ERR_SLUICE_INVALID_OPTION' });
      now = T0 + 1199;
      assert.equal((await limiter.limit('u')).allowed, false);
      now = T0 + 1200;
      assert.equal((await limiter.extend('u', held)).extended, false);
      const next = leaseOf(await limiter.limit('u'));
      await limiter.release('u', next);
      const gone = await limiter.extend('u', next);
      assert.equal(gone.extended, false);
      assert.equal(gone.lease, undefined);
    });

    test('tokens strictly increase, within one clock reading too', async () => {
      now = T0;
      const limiter = limiterOf(100, 1000);
      const decisions = await Promise.all(Array.from({ length: 50 }, () => limiter.limit('u')));
      const tokens = decisions.map((decision) => leaseOf(decision).token);
      assert.deepEqual(
        tokens,
        Array.from({ length: 50 }, (_, i) => T0 * 1000 + i),
      );
    });

    test('a clock that steps back leaves tokens increasing while the identifier has state', async () => {
      now = T0;
      const limiter = limiterOf(5, 1000);
      const first = leaseOf(await limiter.limit('u'));
      await limiter.release('u', first);
      now = T0 - 60_000;
      const back = leaseOf(await limiter.limit('u'));
      assert.equal(back.token, first.token + 1);
    });

    test('calls a concurrency policy does not take, and leases it did not give, are refused', async () => {
      const limiter = limiterOf(2, 1000);
      await assert.rejects(limiter.refund('u'), { code: 'ERR_SLUICE_UNSUPPORTED_OPERATION' });
      await assert.rejects(limiter.release('u', { id: 'a/b', token: 1, expiresAt: 0 }), {
        code: 'ERR_SLUICE_INVALID_LEASE',
      });
      await assert.rejects(limiter.release('u', undefined as unknown as Lease), {
        code: 'ERR_SLUICE_INVALID_LEASE',
      });
      await assert.rejects(limiter.extend('u', { id: 'abc', token: 1, expiresAt: 0 }, 0), {
        code: 'ERR_SLUICE_INVALID_OPTION',
      });
      const rate = createLimiter({
        store: makeStore(),
        policy: gcra({ limit: 5, periodMs: 1000 }),
        name: unique('g'),
      });
      await assert.rejects(rate.release('u', { id: 'abc', token: 1, expiresAt: 0 }), {
        code: 'ERR_SLUICE_UNSUPPORTED_OPERATION',
      });
      assert.throws(
        () =>
          createLimiter({
            store: makeStore(),
            policy: concurrency({ limit: 1, leaseMs: 10 }),
            name: 'x',
            denyCache: true,
          }),
        { code: 'ERR_SLUICE_INVALID_OPTION' },
      );
      assert.throws(() => concurrency({ limit: 10_001, leaseMs: 10 }), { code: 'ERR_SLUICE_LIMIT_TOO_HIGH' });
      assert.throws(() => concurrency({ limit: 1, leaseMs: 0 }), { code: 'ERR_SLUICE_INVALID_OPTION' });
    });
  });
}

describe('fencing tokens when the deciding clock steps back after the key expired (Redis)', () => {
  test('a step back shorter than the time since the last acquisition keeps tokens increasing; a longer one does not', async () => {
    let now = T0;
    const name = unique('lease-clock');
    const limiter = createLimiter({
      store: new RedisStore({ client: suite.redis.client }),
      policy: concurrency({ limit: 5, leaseMs: 50 }),
      name,
      clock: () => now,
      ...EXACT,
    });
    // Released at once; then the server expires the key (within two lease lengths), and its state with it.
    const acquireAndRelease = async (at: number): Promise<number> => {
      now = at;
      const lease = leaseOf(await limiter.limit('u'));
      await limiter.release('u', lease);
      const key = limiter.store.keyFor(name, 'u');
      while ((await suite.redis.command('PTTL', key)) !== -2)
        await new Promise((resolve) => setTimeout(resolve, 10));
      return lease.token;
    };
    const first = await acquireAndRelease(T0 + 100);
    // The clock runs on to T0 + 400, then steps back 100 ms: still past the last acquisition's reading.
    const second = await acquireAndRelease(T0 + 300);
    assert.equal(second, (T0 + 300) * 1000);
    assert.ok(second > first);
    // It steps back behind the last acquisition's reading, the key being gone: the documented limit.
    const third = await acquireAndRelease(T0 + 200);
    assert.equal(third, (T0 + 200) * 1000, 'read from the clock alone');
    assert.ok(third < second);
  });
});
