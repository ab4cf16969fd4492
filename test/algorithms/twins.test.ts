// The twins are not only alike but right: properties every policy must keep, and reference models
// (the classic token bucket of tokens and a timestamp, an exact log) that the clever encodings must match.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  fixedWindow,
  gcra,
  type Limiter,
  type Policy,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { seeded } from '../helpers/random.js';
import { timed } from '../helpers/timed.js';

const POLICIES: ReadonlyArray<Policy> = [
  fixedWindow({ limit: 5, windowMs: 1000 }),
  slidingLog({ limit: 4, windowMs: 1000 }),
  slidingWindow({ limit: 10, windowMs: 1000 }),
  slidingWindow({ limit: 3, windowMs: 777 }),
  tokenBucket({ capacity: 5, refillPerSecond: 2 }),
  tokenBucket({ capacity: 9, refillPerSecond: 0.7 }),
  gcra({ limit: 10, periodMs: 1000, burst: 4 }),
  gcra({ limit: 3, periodMs: 1000 }),
];

/** Drives a limiter with a random workload, calling `check` after every limit() decision. */
async function explore(
  policy: Policy,
  seed: number,
  check: (
    ctx: { limiter: Limiter; now: number; at: (t: number) => void },
    decision: Awaited<ReturnType<Limiter['limit']>>,
    cost: number,
  ) => Promise<void>,
): Promise<void> {
  const random = seeded(seed);
  const clock = timed(policy);
  let t = clock.now;
  for (let i = 0; i < 400; i++) {
    t += random.next() < 0.5 ? 0 : Math.round(random.next() * policy.windowMs * 400) / 1000;
    clock.at(t);
    const cost = random.next() < 0.7 ? 1 : random.int(1, policy.maxCost);
    const decision = await clock.limiter.limit('id', { cost });
    await check({ limiter: clock.limiter, now: t, at: clock.at }, decision, cost);
    clock.at(t);
  }
}

for (const policy of POLICIES) {
  describe(policy.description, () => {
    test('a denied request is allowed exactly retryAfterMs later, and not a millisecond sooner', async () => {
      let denials = 0;
      await explore(policy, 7, async ({ limiter, now, at }, decision, cost) => {
        if (decision.allowed) {
          assert.equal(decision.retryAfterMs, 0);
          return;
        }
        denials++;
        assert.ok(decision.retryAfterMs >= 1);
        // Time only moves forward: looking later drops expired state for good.
        at(now + decision.retryAfterMs - 1);
        assert.equal((await limiter.peek('id', { cost })).allowed, false, 'denied 1 ms before retryAfterMs');
        at(now + decision.retryAfterMs);
        assert.equal((await limiter.peek('id', { cost })).allowed, true, 'allowed at retryAfterMs');
      });
      assert.ok(denials > 20, `only ${denials} denials explored`);
    });

    test('resetMs later the allowance is full again; remaining counts what is left', async () => {
      await explore(policy, 11, async ({ limiter, now, at }, decision) => {
        // `remaining` more single units pass at this instant, and no more.
        const peeked = await limiter.peek('id', { cost: Math.max(1, decision.remaining) });
        if (decision.remaining > 0) assert.equal(peeked.allowed, true);
        else assert.equal((await limiter.peek('id')).allowed, false);
        if (decision.remaining + 1 <= policy.maxCost) {
          assert.equal((await limiter.peek('id', { cost: decision.remaining + 1 })).allowed, false);
        }
        if (decision.resetMs > 0) {
          at(now + decision.resetMs - 1);
          assert.ok((await limiter.peek('id')).remaining < policy.limit, `not yet full 1 ms before resetMs`);
        }
        at(now + decision.resetMs);
        const later = await limiter.peek('id');
        assert.equal(later.remaining, policy.limit, `full after resetMs=${decision.resetMs}`);
      });
    });

    test('a denied request consumes nothing', async () => {
      await explore(policy, 13, async ({ limiter }, decision) => {
        if (decision.allowed) return;
        const before = await limiter.peek('id');
        const again = await limiter.limit('id', { cost: policy.maxCost });
        const after = await limiter.peek('id');
        if (!again.allowed) assert.deepEqual(after, before);
        else await limiter.refund('id', policy.maxCost);
      });
    });
  });
}

describe('reference models', () => {
  test('tokenBucket decides as the classic bucket of tokens and a timestamp', async () => {
    for (const [capacity, rate, seed] of [
      [5, 2, 1],
      [10, 10, 2],
      [7, 0.5, 3],
    ] as const) {
      const random = seeded(seed);
      const clock = timed(tokenBucket({ capacity, refillPerSecond: rate }));
      let tokens: number = capacity;
      let ts = clock.now;
      let t = clock.now;
      for (let i = 0; i < 3000; i++) {
        t += random.next() < 0.4 ? 0 : random.int(0, 2000);
        clock.at(t);
        const cost = random.int(1, 3);
        tokens = Math.min(capacity, tokens + ((t - ts) * rate) / 1000);
        ts = t;
        const allowed = tokens >= cost - 1e-9;
        if (allowed) tokens -= cost;
        const decision = await clock.limiter.limit('id', { cost });
        assert.equal(decision.allowed, allowed, `step ${i}`);
        assert.equal(decision.remaining, Math.max(0, Math.floor(tokens + 1e-9)), `step ${i}`);
      }
    }
  });

  test('slidingLog admits exactly what an explicit log of times admits', async () => {
    const random = seeded(5);
    const windowMs = 1000;
    const limit = 6;
    const clock = timed(slidingLog({ limit, windowMs }));
    const log: number[] = [];
    let t = clock.now;
    for (let i = 0; i < 3000; i++) {
      t += random.int(0, 400);
      clock.at(t);
      const cost = random.int(1, 3);
      const inWindow = log.filter((x) => x > t - windowMs).length;
      const allowed = inWindow + cost <= limit;
      if (allowed) for (let j = 0; j < cost; j++) log.push(t);
      assert.equal((await clock.limiter.limit('id', { cost })).allowed, allowed, `step ${i}`);
    }
  });

  test('fixedWindow admits at most limit per clock-aligned window, and all of it', async () => {
    const windowMs = 1000;
    const clock = timed(fixedWindow({ limit: 3, windowMs }));
    const start = Math.ceil(clock.now / windowMs) * windowMs;
    const allowed: boolean[] = [];
    for (const at of [0, 1, 2, 999, 999.5, 1000, 1001, 1002, 1003]) {
      clock.at(start + at);
      allowed.push((await clock.limiter.limit('id')).allowed);
    }
    assert.deepEqual(allowed, [true, true, true, false, false, true, true, true, false]);
  });

  test('slidingWindow weighs the previous window by its overlap', async () => {
    const windowMs = 1000;
    const clock = timed(slidingWindow({ limit: 10, windowMs }));
    const start = Math.ceil(clock.now / windowMs) * windowMs;
    clock.at(start + 500);
    assert.equal((await clock.limiter.limit('id', { cost: 10 })).allowed, true);
    // 250 ms into the next window, 75% of the previous 10 still count: 2 units of room.
    clock.at(start + 1250);
    const peek = await clock.limiter.peek('id');
    assert.equal(peek.remaining, 2);
    assert.equal((await clock.limiter.limit('id', { cost: 3 })).allowed, false);
    assert.equal((await clock.limiter.limit('id', { cost: 2 })).allowed, true);
  });

  test('gcra spaces requests by period/limit after the burst', async () => {
    const clock = timed(gcra({ limit: 10, periodMs: 1000, burst: 2 }));
    const t0 = clock.now;
    const at = (dt: number) => {
      clock.at(t0 + dt);
      return clock.limiter.limit('id');
    };
    assert.equal((await at(0)).allowed, true);
    assert.equal((await at(0)).allowed, true);
    const third = await at(0);
    assert.equal(third.allowed, false);
    assert.equal(third.retryAfterMs, 100);
    assert.equal((await at(99)).allowed, false);
    assert.equal((await at(100)).allowed, true);
    assert.equal((await at(150)).allowed, false);
    assert.equal((await at(200)).allowed, true);
  });
});
