// takeUpTo (partial grants): the Lua branch of each algorithm and its twin agree on every field; a grant is
// min(n, what is free) and a refusal takes nothing; under 500 concurrent calls the grants add up to the limit.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  concurrency,
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  gcra,
  type Limiter,
  type Policy,
  type Store,
  slidingLog,
  slidingWindow,
  type TakeDecision,
  tokenBucket,
} from '../../src/index.js';
import { BACKENDS, type Backend, openBackend } from '../helpers/backends.js';
import { isCode } from '../helpers/errors.js';
import { seeded } from '../helpers/random.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { unique } from '../helpers/suites.js';

// Every algorithm that takes part of a request, small enough that sequences reach their limits.
const POLICIES: ReadonlyArray<() => Policy> = [
  () => fixedWindow({ limit: 9, windowMs: 1000 }),
  () => slidingLog({ limit: 7, windowMs: 1000 }),
  () => slidingWindow({ limit: 10, windowMs: 700 }),
  () => tokenBucket({ capacity: 8, refillPerSecond: 3 }),
  () => gcra({ limit: 10, periodMs: 1000, burst: 6 }),
];

// The same, with a limit of 1000 and no refill to speak of within a frozen clock.
const THOUSAND: ReadonlyArray<() => Policy> = [
  () => fixedWindow({ limit: 1000, windowMs: 3_600_000 }),
  () => slidingLog({ limit: 1000, windowMs: 3_600_000 }),
  () => slidingWindow({ limit: 1000, windowMs: 3_600_000 }),
  () => tokenBucket({ capacity: 1000, refillPerSecond: 0.001 }),
  () => gcra({ limit: 1000, periodMs: 3_600_000, burst: 1000 }),
];

const T0 = 1_700_000_000_000;

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/** A limiter on `store` whose clock is `clock.now` (the same instant on both stores). */
function clocked(store: Store, policy: Policy, clock: { now: number }, name: string): Limiter {
  return createLimiter({ store, policy, name, clock: () => clock.now, timeoutMs: 60_000 });
}

/** The fields a decision of takeUpTo (or of another call) carries, for comparing two stores. */
function fieldsOf(decision: Partial<TakeDecision>) {
  const { allowed, limit, remaining, resetMs, retryAfterMs, granted } = decision;
  return { allowed, limit, remaining, resetMs, retryAfterMs, granted };
}

describe('takeUpTo: memory and Redis agree', () => {
  let redis: Backend;
  let memory: Backend;
  before(async () => {
    redis = await openBackend('ioredis', server);
    memory = await openBackend('memory', server);
  });
  after(async () => {
    await redis.close();
    await memory.close();
  });

  for (const make of POLICIES) {
    const policy = make();
    test(`${policy.description}: 600 random calls, every field alike`, async () => {
      const random = seeded(policy.limit * 97 + policy.windowMs);
      const clock = { now: T0 };
      const name = unique('take');
      const onRedis = clocked(redis.store, make(), clock, name);
      const inMemory = clocked(memory.store, make(), clock, name);
      let partial = 0;
      let refused = 0;
      for (let i = 0; i < 600; i++) {
        clock.now += random.next() < 0.6 ? 0 : random.int(0, Math.ceil(policy.windowMs / 4));
        const identifier = random.pick(['a', 'b']);
        const roll = random.next();
        if (roll < 0.55) {
          const n = random.int(1, policy.maxCost);
          const before = await inMemory.peek(identifier);
          const [left, right] = await Promise.all([
            onRedis.takeUpTo(identifier, n),
            inMemory.takeUpTo(identifier, n),
          ]);
          assert.deepEqual(fieldsOf(left), fieldsOf(right), `call ${i}: takeUpTo(${identifier}, ${n})`);
          // As many as were free, up to n; or a refusal, taking nothing.
          assert.equal(right.granted, Math.min(n, before.remaining), `call ${i}: granted`);
          assert.equal(right.allowed, right.granted > 0);
          if (right.allowed) assert.equal(right.remaining, before.remaining - right.granted);
          else assert.ok(right.retryAfterMs > 0, 'a refusal says when one unit is free');
          if (right.allowed && right.granted < n) partial++;
          if (!right.allowed) refused++;
        } else {
          const operation = roll < 0.8 ? 'limit' : roll < 0.9 ? 'peek' : 'refund';
          const cost = random.int(1, policy.maxCost);
          const call = (limiter: Limiter) =>
            operation === 'refund'
              ? limiter.refund(identifier, cost)
              : limiter[operation](identifier, { cost });
          const [left, right] = await Promise.all([call(onRedis), call(inMemory)]);
          assert.deepEqual(
            fieldsOf(left),
            fieldsOf(right),
            `call ${i}: ${operation}(${identifier}, ${cost})`,
          );
        }
      }
      // The sequences reached both kinds of answer that differ from limit's.
      assert.ok(partial > 10, `${partial} partial grants`);
      assert.ok(refused > 10, `${refused} refusals`);
    });
  }
});

for (const kind of BACKENDS.filter((one) => one !== 'node-redis')) {
  describe(`takeUpTo on ${kind}: 500 concurrent calls`, () => {
    let backend: Backend;
    before(async () => {
      backend = await openBackend(kind, server);
    });
    after(async () => {
      await backend.close();
    });

    for (const make of THOUSAND) {
      const policy = make();
      test(`${policy.description}: the grants add up to exactly the limit`, async () => {
        const random = seeded(500);
        const clock = { now: T0 };
        const limiter = clocked(backend.store, policy, clock, unique('take500'));
        const asked = Array.from({ length: 500 }, () => random.int(1, 5));
        const decisions = await Promise.all(asked.map((n) => limiter.takeUpTo('worker', n)));
        const total = decisions.reduce((sum, decision) => sum + decision.granted, 0);
        assert.ok(asked.reduce((sum, n) => sum + n, 0) > 1000, 'the calls ask for more than the limit');
        assert.equal(total, 1000, 'every unit granted once, none twice');
        decisions.forEach((decision, i) => {
          const n = asked[i] as number;
          if (decision.allowed) assert.ok(decision.granted >= 1 && decision.granted <= n, `call ${i}`);
          else assert.equal(decision.granted, 0, `call ${i}`);
        });
        // One call at most got part of what it asked: the one that found fewer units than it asked.
        const partial = decisions.filter(
          (decision, i) => decision.allowed && decision.granted < (asked[i] as number),
        );
        assert.ok(partial.length <= 1, `${partial.length} partial grants`);
        assert.equal((await limiter.peek('worker')).remaining, 0);
      });
    }
  });
}

describe('takeUpTo: what it refuses', () => {
  test('a concurrency policy, and n that is not a positive integer at most maxCost', async () => {
    const memory = await openBackend('memory', server);
    try {
      const leases = createLimiter({
        store: memory.store,
        policy: concurrency({ limit: 2, leaseMs: 1000 }),
        name: unique('take'),
      });
      await assert.rejects(leases.takeUpTo('a', 1), isCode(ERROR_CODES.UNSUPPORTED_OPERATION));
      const limiter = createLimiter({
        store: memory.store,
        policy: fixedWindow({ limit: 3, windowMs: 1000 }),
        name: unique('take'),
      });
      await assert.rejects(limiter.takeUpTo('a', 0), isCode(ERROR_CODES.INVALID_COST));
      await assert.rejects(limiter.takeUpTo('a', 4), isCode(ERROR_CODES.COST_EXCEEDS_LIMIT));
      assert.equal((await limiter.peek('a')).remaining, 3, 'nothing was taken');
    } finally {
      await memory.close();
    }
  });

  test("when the store fails, the failure policy's answer says what it let through", async () => {
    const broken: Store = {
      kind: 'broken',
      decide: () => Promise.reject(new Error('down')),
      reset: async () => {},
      keyFor: (name, identifier) => `${name}:${identifier}`,
    };
    const open = createLimiter({
      store: broken,
      policy: fixedWindow({ limit: 5, windowMs: 1000 }),
      name: unique('take'),
      onStoreError: 'allow',
    });
    const decision = await open.takeUpTo('a', 4);
    assert.equal(decision.reason, 'store-error');
    assert.equal(decision.allowed, true);
    assert.equal(decision.granted, 4);
    const closed = createLimiter({
      store: broken,
      policy: fixedWindow({ limit: 5, windowMs: 1000 }),
      name: unique('take'),
      onStoreError: 'deny',
    });
    const refused = await closed.takeUpTo('a', 4);
    assert.equal(refused.allowed, false);
    assert.equal(refused.granted, 0);
  });
});
