// Limits per call (plans, tenants): the Lua scripts and the twins agree under random per-call limits,
// bad limits are refused with nothing written, and a limit that changes mid-window keeps what was used.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  all,
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  gcra,
  MemoryStore,
  type Policy,
  type RedisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { BACKENDS, openBackend } from '../helpers/backends.js';
import { isCode } from '../helpers/errors.js';
import { type ExpiryWatch, watchExpiries } from '../helpers/expiries.js';
import { seeded } from '../helpers/random.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene, openVariant, type Variant } from '../helpers/suites.js';
import { compareTick, runCall, type TwinCall } from '../helpers/twins.js';

const POLICIES: ReadonlyArray<() => Policy> = [
  () => fixedWindow({ limit: 5, windowMs: 1000 }),
  () => slidingLog({ limit: 3, windowMs: 60_000 }),
  () => slidingWindow({ limit: 10, windowMs: 1000 }),
  () => tokenBucket({ capacity: 5, refillPerSecond: 2 }),
  () => gcra({ limit: 10, periodMs: 1000, burst: 3 }),
  () => fixedWindow({ limit: 10, windowMs: 60_000, share: 0.5 }),
];
const STEPS = 600;
const IDENTIFIERS = ['alice', 'bob', 'c{x}'];

/** Whether the policy takes the limit (a region's share may leave a small one below one unit). */
function fits(policy: Policy, limit: number): boolean {
  try {
    policy.withLimit?.(limit);
    return true;
  } catch {
    return false;
  }
}

let server: RedisServer;
let expiries: ExpiryWatch;
before(async () => {
  server = await startRedis();
  expiries = await watchExpiries(server.port);
});
after(async () => {
  await expiries.close();
  await server.stop();
});

for (const [kind, mode] of [
  ['ioredis', 'scripts'],
  ['node-redis', 'functions'],
] as const) {
  describe(`per-call limits: Lua on Redis (${kind}, ${mode}) and the twins agree`, () => {
    let variant: Variant;
    before(async () => {
      variant = await openVariant(kind, mode, server.port, `limits-${kind}`);
    });
    after(async () => {
      try {
        await assertHygiene(variant.connected);
      } finally {
        await variant.connected.close();
      }
    });

    POLICIES.forEach((makePolicy, index) => {
      const policy = makePolicy();
      test(`${policy.description}: ${STEPS} random ticks, a random limit per call`, async () => {
        const random = seeded(7000 + index);
        let now = 1_700_000_000_000 + random.next();
        let lastReal = performance.now();
        const clock = () => now;
        const name = `l${index}`;
        const onRedis = createLimiter({ store: variant.store, policy, name, clock, timeoutMs: 60_000 });
        const inMemory = createLimiter({ store: new MemoryStore(), policy, name, clock });
        // Plans of a few sizes around the policy's own, and sometimes none (the policy's own).
        const base = policy.limit;
        const plans = [undefined, 1, Math.max(1, Math.floor(base / 2)), base, base * 2, base * 3 + 1].filter(
          (plan) => plan === undefined || fits(policy, plan),
        );
        let skipped = 0;
        let limitsSeen = 0;
        for (let tickIndex = 0; tickIndex < STEPS; tickIndex++) {
          const real = performance.now();
          const step = random.next() < 0.7 ? random.next() * 80 : random.next() * policy.windowMs;
          now += Math.max(Math.round(step * 1000) / 1000, real - lastReal);
          lastReal = real;
          const calls: TwinCall[] = [];
          for (let i = 0, n = random.next() < 0.2 ? random.int(2, 6) : 1; i < n; i++) {
            const o = random.next();
            const limit = random.pick(plans);
            const variantPolicy = limit === undefined ? policy : (policy.withLimit?.(limit) ?? policy);
            const cost = random.next() < 0.7 ? 1 : random.int(1, variantPolicy.maxCost);
            const operation = o < 0.75 ? 'limit' : o < 0.9 ? 'peek' : 'refund';
            calls.push(
              limit === undefined
                ? { identifier: random.pick(IDENTIFIERS), operation, cost }
                : {
                    identifier: random.pick(IDENTIFIERS),
                    operation,
                    cost,
                    limit,
                  },
            );
          }
          for (const c of calls) {
            if (c.limit === undefined) continue;
            limitsSeen++;
            const used = await runCall(inMemory, { ...c, operation: 'peek', cost: 1 });
            assert.equal(
              used.limit,
              policy.withLimit?.(c.limit).limit,
              'the decision reports the limit used',
            );
          }
          if (!(await compareTick(expiries, onRedis, inMemory, calls, () => `tick ${tickIndex}`))) skipped++;
        }
        assert.ok(skipped <= STEPS / 20, `${skipped} ticks skipped for keys Redis expired early`);
        assert.ok(limitsSeen > STEPS / 2, `${limitsSeen} calls carried a limit`);
      });
    });
  });
}

for (const kind of BACKENDS) {
  describe(`per-call limits on ${kind}`, () => {
    test('bad limits reject with a typed error and write nothing', async () => {
      const backend = await openBackend(kind, server);
      try {
        const window = createLimiter({
          store: backend.store,
          timeoutMs: 60_000,
          policy: fixedWindow({ limit: 10, windowMs: 60_000 }),
          name: 'bad-limit',
        });
        for (const limit of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '10', null]) {
          await assert.rejects(
            window.limit('k', { limit: limit as number }),
            (error: unknown) =>
              isCode(ERROR_CODES.INVALID_LIMIT)(error) &&
              /`limit` to be a positive integer/.test(String(error)),
            `limit ${String(limit)}`,
          );
        }
        await assert.rejects(
          window.limit('k', { limit: 3, cost: 4 }),
          isCode(ERROR_CODES.COST_EXCEEDS_LIMIT),
        );
        const log = createLimiter({
          store: backend.store,
          timeoutMs: 60_000,
          policy: slidingLog({ limit: 10, windowMs: 60_000 }),
          name: 'bad-log',
        });
        await assert.rejects(log.limit('k', { limit: 1001 }), isCode(ERROR_CODES.LIMIT_TOO_HIGH));
        assert.equal((await log.limit('k', { limit: 1000 })).limit, 1000);
        await log.reset('k');
        const regional = createLimiter({
          store: backend.store,
          timeoutMs: 60_000,
          policy: fixedWindow({ limit: 10, windowMs: 60_000, share: 0.25 }),
          name: 'bad-share',
        });
        await assert.rejects(regional.limit('k', { limit: 3 }), isCode(ERROR_CODES.INVALID_LIMIT));
        assert.equal(
          (await regional.peek('k', { limit: 8 })).limit,
          2,
          'a call limit is scaled to the share',
        );
        const combined = all([window, log]);
        await assert.rejects(combined.limit('k', { limit: [5, 0] }), isCode(ERROR_CODES.INVALID_LIMIT));
        await assert.rejects(combined.limit('k', { limit: [5] }), isCode(ERROR_CODES.INVALID_OPTION));
        if (backend.redis !== undefined) {
          assert.deepEqual(await backend.redis.command('KEYS', 'rl:bad-*'), [], 'nothing written');
        }
        for (const name of ['bad-limit', 'bad-log', 'bad-share']) {
          const probe = createLimiter({
            store: backend.store,
            timeoutMs: 60_000,
            policy: fixedWindow({ limit: 10, windowMs: 60_000 }),
            name,
          });
          assert.equal((await probe.peek('k')).remaining, 10, `${name}: nothing counted`);
        }
      } finally {
        await backend.close();
      }
    });

    test('a limit that changes mid-window: the windows and the log keep the units used', async () => {
      const backend = await openBackend(kind, server);
      try {
        const clock = () => 1_700_000_030_000;
        for (const [index, policy] of [
          fixedWindow({ limit: 10, windowMs: 60_000 }),
          slidingWindow({ limit: 10, windowMs: 60_000 }),
          slidingLog({ limit: 10, windowMs: 60_000 }),
        ].entries()) {
          const limiter = createLimiter({
            store: backend.store,
            timeoutMs: 60_000,
            policy,
            name: `change-${kind}-${index}`,
            clock,
          });
          assert.equal((await limiter.limit('customer', { cost: 6 })).remaining, 4);
          // Downgraded to 5: the 6 used stay used, so nothing is left and a request is denied.
          const lowered = await limiter.limit('customer', { limit: 5 });
          assert.deepEqual(
            [lowered.allowed, lowered.limit, lowered.remaining],
            [false, 5, 0],
            policy.description,
          );
          // Upgraded to 20: 14 left after this request.
          const raised = await limiter.limit('customer', { limit: 20 });
          assert.deepEqual(
            [raised.allowed, raised.limit, raised.remaining],
            [true, 20, 13],
            policy.description,
          );
          assert.equal(
            (await limiter.peek('customer')).remaining,
            3,
            'back on the policy own limit: 7 used of 10',
          );
        }
      } finally {
        await backend.close();
      }
    });

    test('a limit that changes mid-period: GCRA and the bucket keep how full they are', async () => {
      const backend = await openBackend(kind, server);
      try {
        const clock = () => 1_700_000_030_000;
        const bucket = createLimiter({
          store: backend.store,
          timeoutMs: 60_000,
          policy: tokenBucket({ capacity: 10, refillPerSecond: 1 }),
          name: `change-bucket-${kind}`,
          clock,
        });
        assert.equal((await bucket.limit('customer', { cost: 5 })).remaining, 5);
        // Twice the capacity and twice the refill: half full still, so 10 of 20 left.
        const doubled = await bucket.peek('customer', { limit: 20 });
        assert.deepEqual([doubled.limit, doubled.remaining, doubled.resetMs], [20, 10, 5000]);
        const rate = createLimiter({
          store: backend.store,
          timeoutMs: 60_000,
          policy: gcra({ limit: 10, periodMs: 10_000, burst: 4 }),
          name: `change-gcra-${kind}`,
          clock,
        });
        const plan = await rate.limit('customer', { limit: 20 });
        // 20 per 10 s: the burst scales from 4 to 8.
        assert.deepEqual([plan.allowed, plan.limit, plan.remaining], [true, 8, 7]);
        // A refund under the same limit gives back one emission interval of that plan.
        assert.equal((await rate.refund('customer', 1, { limit: 20 })).remaining, 8);
      } finally {
        await backend.close();
      }
    });
  });
}

test('calls with the same per-call limit share one script call; other limits get their own', async () => {
  const variant = await openVariant('ioredis', 'scripts', server.port, 'batch');
  try {
    const store = variant.store as RedisStore;
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 100, windowMs: 60_000 }),
      name: 'plans',
      timeoutMs: 60_000,
    });
    await limiter.peek('warm');
    const before = store.calls;
    const decisions = await Promise.all(
      Array.from({ length: 60 }, (_, i) => limiter.limit(`user:${i}`, { limit: i % 2 === 0 ? 500 : 1000 })),
    );
    assert.equal(store.calls - before, 2, 'one call per plan');
    assert.deepEqual([...new Set(decisions.map((d) => `${d.limit}:${d.remaining}`))].sort(), [
      '1000:999',
      '500:499',
    ]);
  } finally {
    await variant.connected.close();
  }
});
