// `charge` is right, not only alike on both stores: its wait is exact, its debt bounded by maxDebt and
// paid off by each algorithm's own refill, and the token bucket's matches a bucket whose tokens go below zero.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type ChargeDecision,
  ERROR_CODES,
  fixedWindow,
  gcra,
  type Policy,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { seeded } from '../helpers/random.js';
import { timed } from '../helpers/timed.js';

const POLICIES: ReadonlyArray<Policy> = [
  fixedWindow({ limit: 5, windowMs: 1000 }),
  fixedWindow({ limit: 8, windowMs: 1000, maxDebt: 3 }),
  slidingLog({ limit: 4, windowMs: 1000 }),
  slidingLog({ limit: 6, windowMs: 1000, maxDebt: 0 }),
  slidingWindow({ limit: 10, windowMs: 1000 }),
  slidingWindow({ limit: 3, windowMs: 777, maxDebt: 9 }),
  tokenBucket({ capacity: 5, refillPerSecond: 2 }),
  tokenBucket({ capacity: 9, refillPerSecond: 0.7, maxDebt: 20 }),
  gcra({ limit: 10, periodMs: 1000, burst: 4 }),
  gcra({ limit: 3, periodMs: 1000, maxDebt: 1 }),
];

for (const policy of POLICIES) {
  describe(`charge: ${policy.description}`, () => {
    test('a request of 1 passes exactly retryAfterMs after a charge, never sooner; the debt stays within maxDebt', async () => {
      const random = seeded(policy.limit * 31 + policy.windowMs);
      const clock = timed(policy);
      const maxDebt = policy.maxDebt ?? policy.limit;
      let t = clock.now;
      let owed = 0;
      let cut = 0;
      for (let i = 0; i < 400; i++) {
        t += random.next() < 0.5 ? 0 : Math.round(random.next() * policy.windowMs * 300) / 1000;
        clock.at(t);
        if (random.next() < 0.5) {
          await clock.limiter.limit('id', { cost: random.int(1, policy.maxCost) });
          continue;
        }
        const amount = random.int(1, 2 * (policy.limit + maxDebt));
        const decision: ChargeDecision = await clock.limiter.charge('id', amount);
        assert.equal(decision.allowed, true, 'a charge is never refused');
        assert.ok(decision.debt >= 0 && decision.debt <= maxDebt, `debt ${decision.debt} within ${maxDebt}`);
        assert.ok(decision.cutOff >= 0 && decision.cutOff <= amount);
        if (decision.debt > 0) assert.equal(decision.remaining, 0, 'nothing remains while in debt');
        if (decision.debt > 0) owed++;
        if (decision.cutOff > 0) cut++;
        const peek = await clock.limiter.peek('id');
        assert.equal(peek.allowed, decision.retryAfterMs === 0, 'a request of 1 passes now iff no wait');
        if (decision.retryAfterMs > 0) {
          clock.at(t + decision.retryAfterMs - 1);
          assert.equal((await clock.limiter.peek('id')).allowed, false, 'refused 1 ms before retryAfterMs');
          clock.at(t + decision.retryAfterMs);
          assert.equal((await clock.limiter.peek('id')).allowed, true, 'allowed at retryAfterMs');
        }
        clock.at(t);
      }
      if (maxDebt > 0) assert.ok(owed > 20, `only ${owed} charges went into debt`);
      assert.ok(cut > 5, `only ${cut} charges were cut off`);
    });

    test('what a charge takes shows in what a peek sees; what it cuts off does not', async () => {
      const clock = timed(policy);
      const maxDebt = policy.maxDebt ?? policy.limit;
      const first = await clock.limiter.charge('id', policy.limit + maxDebt + 7);
      assert.equal(first.cutOff, 7);
      assert.equal(first.debt, maxDebt);
      // At the most it may owe, a further charge takes nothing and says so.
      const again = await clock.limiter.charge('id', 3);
      assert.deepEqual([again.debt, again.cutOff], [maxDebt, 3]);
      assert.equal((await clock.limiter.peek('id')).remaining, 0);
    });
  });
}

describe('charge: each algorithm pays its debt off by its own refill', () => {
  test('tokenBucket decides as a bucket whose tokens go below zero, down to −maxDebt', async () => {
    for (const [capacity, rate, maxDebt, seed] of [
      [5, 2, 5, 1],
      [10, 10, 3, 2],
      [7, 0.5, 20, 3],
    ] as const) {
      const random = seeded(seed);
      const clock = timed(tokenBucket({ capacity, refillPerSecond: rate, maxDebt }));
      let tokens: number = capacity;
      let ts = clock.now;
      let t = clock.now;
      for (let i = 0; i < 3000; i++) {
        t += random.next() < 0.4 ? 0 : random.int(0, 2000);
        clock.at(t);
        tokens = Math.min(capacity, tokens + ((t - ts) * rate) / 1000);
        ts = t;
        if (random.next() < 0.3) {
          const amount = random.int(1, 3 * capacity);
          const taken = Math.min(amount, Math.max(0, Math.floor(tokens + maxDebt + 1e-9)));
          tokens -= taken;
          const decision = await clock.limiter.charge('id', amount);
          assert.equal(decision.cutOff, amount - taken, `step ${i}: cut off`);
          assert.equal(decision.debt, Math.max(0, Math.ceil(-tokens - 1e-9)), `step ${i}: debt`);
          continue;
        }
        const cost = random.int(1, 3);
        const allowed = tokens >= cost - 1e-9;
        if (allowed) tokens -= cost;
        const decision = await clock.limiter.limit('id', { cost });
        assert.equal(decision.allowed, allowed, `step ${i}`);
        assert.equal(decision.remaining, Math.max(0, Math.floor(tokens + 1e-9)), `step ${i}`);
      }
    }
  });

  test('fixedWindow: the debt counts in its window and ends with it', async () => {
    const windowMs = 1000;
    const clock = timed(fixedWindow({ limit: 10, windowMs }));
    const start = Math.ceil(clock.now / windowMs) * windowMs;
    clock.at(start + 100);
    const charged = await clock.limiter.charge('id', 14);
    assert.deepEqual([charged.debt, charged.cutOff, charged.retryAfterMs], [4, 0, 900]);
    clock.at(start + 999);
    assert.equal((await clock.limiter.limit('id')).allowed, false);
    clock.at(start + 1000);
    assert.equal((await clock.limiter.limit('id', { cost: 10 })).allowed, true);
  });

  test('slidingWindow: the debt weighs on the next window as the usage it is', async () => {
    const windowMs = 1000;
    const clock = timed(slidingWindow({ limit: 10, windowMs }));
    const start = Math.ceil(clock.now / windowMs) * windowMs;
    clock.at(start + 500);
    const charged = await clock.limiter.charge('id', 15);
    assert.equal(charged.debt, 5);
    // 15 counted: one unit fits once 15 × (1 − f) ≤ 9, 40% into the next window.
    assert.equal(charged.retryAfterMs, 500 + 400);
    clock.at(start + 1399);
    assert.equal((await clock.limiter.peek('id')).allowed, false);
    clock.at(start + 1400);
    assert.equal((await clock.limiter.peek('id')).allowed, true);
  });

  test('gcra: the theoretical arrival time moves on, one interval per unit owed', async () => {
    const clock = timed(gcra({ limit: 10, periodMs: 1000, burst: 2, maxDebt: 10 }));
    const t0 = clock.now;
    const charged = await clock.limiter.charge('id', 5);
    // 5 units of 100 ms against a tolerance of 2: 3 owed, and a request of 1 waits 400 ms.
    assert.deepEqual(
      [charged.debt, charged.retryAfterMs, charged.remaining, charged.resetMs],
      [3, 400, 0, 500],
    );
    clock.at(t0 + 399);
    assert.equal((await clock.limiter.limit('id')).allowed, false);
    clock.at(t0 + 400);
    assert.equal((await clock.limiter.limit('id')).allowed, true);
  });
});

describe('charge: what is checked', () => {
  test('maxDebt and unit are validated with the option named', () => {
    const cases: ReadonlyArray<[() => unknown, RegExp]> = [
      [
        () => fixedWindow({ limit: 5, windowMs: 1000, maxDebt: -1 }),
        /`fixedWindow\.maxDebt` to be a whole number \(0 or more\), got -1/,
      ],
      [
        () => tokenBucket({ capacity: 5, refillPerSecond: 1, maxDebt: 1.5 }),
        /`tokenBucket\.maxDebt`.*got 1\.5/,
      ],
      [
        () => slidingLog({ limit: 5, windowMs: 1000, maxDebt: 1001 }),
        /`slidingLog\.maxDebt` to be a whole number of at most 1000/,
      ],
      [() => gcra({ limit: 5, periodMs: 1000, unit: 'Tokens' }), /`gcra\.unit` to be a unit name/],
      [() => slidingWindow({ limit: 5, windowMs: 1000, unit: '' }), /`slidingWindow\.unit`/],
    ];
    for (const [make, message] of cases) {
      assert.throws(make, (error: { code?: string; message: string }) => {
        assert.equal(error.code, ERROR_CODES.INVALID_OPTION);
        assert.match(error.message, message);
        return true;
      });
    }
  });

  test('a charge may be larger than the policy ever grants at once, never 0, negative or fractional; nothing is written for a bad one', async () => {
    const clock = timed(gcra({ limit: 10, periodMs: 1000 }));
    const large = await clock.limiter.charge('id', 1_000_000);
    assert.deepEqual([large.debt, large.cutOff], [10, 1_000_000 - 20]);
    for (const amount of [0, -1, 1.5, Number.NaN, '3']) {
      await assert.rejects(
        clock.limiter.charge('other', amount as number),
        (error: { code?: string; message: string }) => {
          assert.equal(error.code, ERROR_CODES.INVALID_COST);
          assert.match(error.message, /Expected `amount` to be a positive integer/);
          return true;
        },
      );
    }
    assert.equal((await clock.limiter.peek('other')).remaining, 10);
  });

  test('descriptions name a maxDebt or unit only when given', () => {
    assert.equal(
      tokenBucket({ capacity: 5, refillPerSecond: 1 }).description,
      'tokenBucket(capacity=5,refillPerSecond=1)',
    );
    assert.equal(
      slidingWindow({ limit: 5, windowMs: 1000, maxDebt: 0, unit: 'tokens' }).description,
      'slidingWindow(limit=5,windowMs=1000,maxDebt=0,unit=tokens)',
    );
  });

  test('a call with its own limit owes up to that limit by default, an explicit maxDebt whatever the limit', async () => {
    const clock = timed(fixedWindow({ limit: 10, windowMs: 60_000 }));
    const plan = await clock.limiter.charge('a', 1000, { limit: 100 });
    assert.deepEqual([plan.limit, plan.debt], [100, 100]);
    const fixed = timed(fixedWindow({ limit: 10, windowMs: 60_000, maxDebt: 4 }));
    const withDebt = await fixed.limiter.charge('a', 1000, { limit: 100 });
    assert.deepEqual([withDebt.limit, withDebt.debt], [100, 4]);
  });
});
