// Keeps the twins honest: the same random sequences decided by the Lua scripts on a real Redis and by
// the TypeScript twins in the memory store, with the same clock, must agree on every field.
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
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { type ExpiryWatch, watchExpiries } from '../helpers/expiries.js';
import { type Random, seeded } from '../helpers/random.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene, openVariant, VARIANTS, type Variant } from '../helpers/suites.js';
import { compareTick, type TwinCall } from '../helpers/twins.js';

// Each algorithm with its default debt (one allowance) and with a `maxDebt` of its own (0 included:
// a charge that may never pass the limit).
const POLICIES: ReadonlyArray<() => Policy> = [
  () => fixedWindow({ limit: 5, windowMs: 1000 }),
  () => fixedWindow({ limit: 40, windowMs: 60_000, maxDebt: 7 }),
  () => slidingLog({ limit: 3, windowMs: 60_000 }),
  () => slidingLog({ limit: 20, windowMs: 1000, maxDebt: 0 }),
  () => slidingWindow({ limit: 10, windowMs: 1000, maxDebt: 25 }),
  () => slidingWindow({ limit: 7, windowMs: 333 }),
  () => tokenBucket({ capacity: 5, refillPerSecond: 2 }),
  () => tokenBucket({ capacity: 12, refillPerSecond: 0.3, maxDebt: 30 }),
  () => gcra({ limit: 10, periodMs: 1000, burst: 3, maxDebt: 1 }),
  () => gcra({ limit: 7, periodMs: 3000 }),
];
const STEPS = 1500;
const IDENTIFIERS = ['alice', 'bob', 'c{x}', '%7B', 'd}', 'ünï'];

type Call = TwinCall;

/**
 * A `schedule`, for policies that hand out future slots: a longest wait from "only read" (-1) to a
 * few windows, and one in five pausing the identifier as an upstream's 429 would.
 */
function randomSchedule(random: Random, policy: Policy): Pick<Call, 'operation' | 'maxWaitMs' | 'pauseMs'> {
  const w = random.next();
  const maxWaitMs = w < 0.1 ? -1 : w < 0.2 ? 0 : random.int(1, policy.windowMs * 3);
  const pauseMs = random.next() < 0.2 ? random.int(1, policy.windowMs * 2) : 0;
  return { operation: 'schedule', maxWaitMs, pauseMs };
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

function compare(
  onRedis: Limiter,
  inMemory: Limiter,
  calls: readonly Call[],
  describeTick: () => string,
): Promise<readonly Decision[] | undefined> {
  return compareTick(expiries, onRedis, inMemory, calls, describeTick);
}

/** A random call: mostly `limit`, some looks, refunds and charges (some far past what is left). */
function randomCall(random: ReturnType<typeof seeded>, policy: Policy): Call {
  if (policy.schedules === true && random.next() < 0.2) {
    const cost = random.next() < 0.7 ? 1 : random.int(1, policy.maxCost);
    return { identifier: random.pick(IDENTIFIERS), cost, ...randomSchedule(random, policy) };
  }
  const o = random.next();
  const operation = o < 0.65 ? 'limit' : o < 0.78 ? 'peek' : o < 0.88 ? 'refund' : 'charge';
  let cost = random.next() < 0.7 ? 1 : random.int(1, policy.maxCost);
  // A charge may be anything: past the limit and past what the debt allows (then cut off).
  if (operation === 'charge' && random.next() < 0.4)
    cost = random.int(1, 3 * (policy.limit + (policy.maxDebt ?? 0)));
  return { identifier: random.pick(IDENTIFIERS), operation, cost };
}

/**
 * A key in debt lives until its debt is paid: its expiry on Redis is at least the wait until a
 * request of 1 passes again, less the real time since it was written (the test clock runs at least
 * as fast as real time, so a key that lives that long in real time outlives the debt on the test's).
 */
async function assertOutlivesDebt(
  variant: Variant,
  key: string,
  decision: Decision,
  sinceMs: number,
  describeTick: () => string,
): Promise<void> {
  if ((decision.debt ?? 0) === 0) return;
  const ttl = Number(await variant.connected.command('PTTL', key));
  const elapsed = performance.now() - sinceMs;
  assert.notEqual(ttl, -1, `${describeTick()}: a key in debt (${key}) has an expiry`);
  if (ttl === -2) {
    // Gone: fine only if the debt was paid by then (a stalled machine can take that long to ask).
    assert.ok(
      elapsed >= decision.retryAfterMs - 1,
      `${describeTick()}: ${key} owes ${decision.debt} for ${decision.retryAfterMs} ms but was gone after ${elapsed.toFixed(1)} ms`,
    );
    return;
  }
  assert.ok(
    // 3 ms for rounding: the test clock has fractions of a ms, retryAfterMs is rounded up, PEXPIRE
    // takes whole ms and PTTL answers them rounded down (59,998 against 60,000 was seen).
    ttl >= decision.retryAfterMs - elapsed - 3,
    `${describeTick()}: ${key} owes ${decision.debt} for ${decision.retryAfterMs} ms but expires in ${ttl} ms`,
  );
}

for (const { kind, mode } of VARIANTS) {
  describe(`Lua on Redis (${kind}, ${mode}) and the TypeScript twins agree`, () => {
    let variant: Variant;
    before(async () => {
      variant = await openVariant(kind, mode, server.port, `diff-${kind}-${mode}`);
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
      test(`${policy.description}: ${STEPS} random ticks`, async () => {
        const seed = 1000 * index + VARIANTS.findIndex((v) => v.kind === kind && v.mode === mode);
        const random = seeded(seed);
        let now = 1_700_000_000_000 + random.next();
        let lastReal = performance.now();
        const clock = () => now;
        const name = `p${index}`;
        // A busy machine must not turn a slow reply into a timeout decision: this suite compares decisions.
        const onRedis = createLimiter({ store: variant.store, policy, name, clock, timeoutMs: 60_000 });
        const inMemory = createLimiter({ store: new MemoryStore(), policy, name, clock });
        let decisions = 0;
        let skipped = 0;
        let charged = 0;
        let inDebt = 0;
        let cutOff = 0;
        for (let tickIndex = 0; tickIndex < STEPS; tickIndex++) {
          const r = random.next();
          let step = 0;
          if (r < 0.6) step = Math.round(random.next() * 50_000) / 1000;
          else if (r < 0.85) step = Math.round(random.next() * policy.windowMs * 300) / 1000;
          else if (r < 0.99) step = Math.round(random.next() * policy.windowMs * 2000) / 1000;
          else step = policy.windowMs * 10;
          if (r < 0.2) step = 0;
          // Redis expires keys in real time: the test clock never runs slower than real time, which
          // makes early expiries rare (compare() tells the remaining ones apart).
          const real = performance.now();
          now += Math.max(step, real - lastReal);
          lastReal = real;
          // Several calls in one tick exercise the coalesced script call over many keys, in order.
          const tick = random.next() < 0.2 ? random.int(2, 8) : 1;
          const calls: Call[] = [];
          for (let i = 0; i < tick; i++) calls.push(randomCall(random, policy));
          const describeTick = () => `seed ${seed}, tick ${tickIndex}, now ${now}`;
          const sentAt = performance.now();
          const compared = await compare(onRedis, inMemory, calls, describeTick);
          if (compared === undefined) {
            skipped++;
            continue;
          }
          decisions += calls.length;
          const [only] = calls;
          if (calls.length === 1 && only?.operation === 'charge') {
            charged++;
            if ((compared[0]?.debt ?? 0) > 0) inDebt++;
            if ((compared[0]?.cutOff ?? 0) > 0) cutOff++;
            const key = variant.store.keyFor(name, only.identifier);
            await assertOutlivesDebt(variant, key, compared[0] as Decision, sentAt, describeTick);
          }
        }
        // Early expiries are rare; a run that skipped much would prove little.
        assert.ok(skipped <= STEPS / 20, `${skipped} ticks skipped for keys Redis expired early`);
        assert.ok(decisions >= STEPS * 0.95);
        // The run went into debt (where the policy allows any), and past maxDebt, often enough to prove something.
        const owes = policy.maxDebt === 0 ? inDebt === 0 : inDebt >= 10;
        assert.ok(owes && cutOff >= 5, `${charged} charges: ${inDebt} in debt, ${cutOff} cut off`);
      });
    });
  });
}

describe('a clock that runs backwards', () => {
  POLICIES.forEach((makePolicy, index) => {
    const policy = makePolicy();
    test(`${policy.description}: Lua and twin agree when time steps back`, async () => {
      const variant = await openVariant('ioredis', 'scripts', server.port, 'back');
      try {
        const random = seeded(policy.windowMs + policy.limit);
        let now = 1_800_000_000_000;
        const clock = () => now;
        const onRedis = createLimiter({
          store: variant.store,
          policy,
          name: `b${index}`,
          clock,
          timeoutMs: 60_000,
        });
        const inMemory = createLimiter({ store: new MemoryStore(), policy, name: `b${index}`, clock });
        let skipped = 0;
        for (let tickIndex = 0; tickIndex < 300; tickIndex++) {
          // Small steps both ways.
          now += Math.round((random.next() - 0.4) * policy.windowMs * 100) / 1000;
          const cost = random.next() < 0.7 ? 1 : random.int(1, policy.maxCost);
          const o = random.next();
          const operation = o < 0.75 ? 'limit' : o < 0.9 ? 'refund' : 'charge';
          const c: Call =
            policy.schedules === true && random.next() < 0.2
              ? { identifier: 'back', cost, ...randomSchedule(random, policy) }
              : { identifier: 'back', operation, cost };
          if (!(await compare(onRedis, inMemory, [c], () => `tick ${tickIndex}, now ${now}`))) skipped++;
        }
        assert.ok(skipped <= 15, `${skipped} ticks skipped for keys Redis expired early`);
      } finally {
        await variant.connected.close();
      }
    });
  });
});
