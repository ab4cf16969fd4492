// Keeps the stored-limit rule honest: random stored limits and denials, read by the Lua scripts on a real
// Redis and by the twins in the memory store, with the same clock, must give the same decisions.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  all,
  createLimiter,
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
import { openVariant, type Variant } from '../helpers/suites.js';
import { compareTick, type TwinCall } from '../helpers/twins.js';

const POLICIES: ReadonlyArray<() => Policy> = [
  () => fixedWindow({ limit: 5, windowMs: 1000 }),
  () => fixedWindow({ limit: 40, windowMs: 60_000, share: 0.3 }),
  () => slidingLog({ limit: 3, windowMs: 60_000 }),
  () => slidingLog({ limit: 20, windowMs: 1000, share: 0.5 }),
  () => slidingWindow({ limit: 10, windowMs: 1000 }),
  () => slidingWindow({ limit: 7, windowMs: 333, share: 0.29 }),
  () => tokenBucket({ capacity: 5, refillPerSecond: 2 }),
  () => tokenBucket({ capacity: 12, refillPerSecond: 0.3, share: 0.29 }),
  () => gcra({ limit: 10, periodMs: 1000, burst: 3 }),
  () => gcra({ limit: 7, periodMs: 3000, share: 0.4 }),
  // A maxDebt of their own, which a stored limit does not scale (one that follows the allowance does).
  () => fixedWindow({ limit: 6, windowMs: 1000, maxDebt: 4 }),
  () => gcra({ limit: 10, periodMs: 1000, burst: 3, maxDebt: 20 }),
];
const STEPS = 800;
const IDENTIFIERS = ['alice', 'bob', 'c{x}', '%7B', 'ünï'];

let server: RedisServer;
let expiries: ExpiryWatch;
let variant: Variant;
/** The same in functions mode (FCALL), where the library must carry the scripts that read stored entries. */
let functions: Variant;
before(async () => {
  server = await startRedis();
  expiries = await watchExpiries(server.port);
  variant = await openVariant('ioredis', 'scripts', server.port, 'stored');
  functions = await openVariant('node-redis', 'functions', server.port, 'stored');
});
after(async () => {
  await variant.connected.close();
  await functions.connected.close();
  await expiries.close();
  await server.stop();
});

/** A stored limit from 1 to three times the policy's own; a few the policy cannot take (refused by both). */
function randomLimit(random: Random, policy: Policy): number {
  return random.next() < 0.05 ? random.int(1, 2000) : random.int(1, 3 * policy.limit + 2);
}

/** Changes what is stored for one identifier on both sides, the same way; both refuse the same limits. */
async function changeStored(random: Random, sides: readonly Limiter[], policy: Policy): Promise<string> {
  const identifier = random.pick(IDENTIFIERS);
  const r = random.next();
  if (r < 0.45) {
    const limit = randomLimit(random, policy);
    const outcomes = await Promise.all(
      sides.map((side) =>
        side.setLimit(identifier, limit).then(
          () => 'stored',
          (error: Error) => error.message,
        ),
      ),
    );
    assert.equal(outcomes[0], outcomes[1]);
    return `setLimit(${identifier}, ${limit}): ${outcomes[0]}`;
  }
  if (r < 0.65) {
    const cleared = await Promise.all(sides.map((side) => side.clearLimit(identifier)));
    assert.equal(cleared[0], cleared[1]);
    return `clearLimit(${identifier})`;
  }
  if (r < 0.85) {
    const forMs = random.int(1, 3 * policy.windowMs);
    await Promise.all(sides.map((side) => side.deny(identifier, { forMs })));
    return `deny(${identifier}, ${forMs})`;
  }
  // Whether there was a denial may differ: Redis keeps an ended one until its key expires in real time.
  await Promise.all(sides.map((side) => side.undeny(identifier)));
  return `undeny(${identifier})`;
}

function fitsCost(policy: Policy, limit: number, cost: number): boolean {
  try {
    return (policy.withLimit?.(limit).maxCost ?? 0) >= cost;
  } catch {
    return false;
  }
}

function randomCalls(random: Random, policy: Policy): TwinCall[] {
  const tick = random.next() < 0.2 ? random.int(2, 8) : 1;
  const calls: TwinCall[] = [];
  for (let i = 0; i < tick; i++) {
    const o = random.next();
    const operation = o < 0.7 ? 'limit' : o < 0.83 ? 'peek' : o < 0.9 ? 'refund' : 'charge';
    // Costs up to the policy's own most: above a smaller stored limit, they meet its denial. A
    // charge may be far more, and owes up to one allowance of the limit it runs under.
    const most = operation === 'charge' ? 4 * policy.maxCost : policy.maxCost;
    const cost = random.next() < 0.6 ? 1 : random.int(1, most);
    // Some calls give their own limit, which wins over a stored one (one their cost fits).
    const limit = random.next() < 0.1 ? random.int(policy.limit, 3 * policy.limit + 2) : undefined;
    const fits = limit !== undefined && operation !== 'refund' && fitsCost(policy, limit, cost);
    const call = { identifier: random.pick(IDENTIFIERS), operation, cost } as const;
    calls.push(fits ? { ...call, limit } : call);
  }
  return calls;
}

describe('stored limits and denials: Lua on Redis and the TypeScript twins agree', () => {
  POLICIES.forEach((makePolicy, index) => {
    const policy = makePolicy();
    test(`${policy.description}: ${STEPS} random ticks with stored limits and denials`, async () => {
      const random = seeded(7000 + index);
      let now = 1_700_000_000_000 + random.next();
      let lastReal = performance.now();
      const clock = () => now;
      const name = `s${index}`;
      const options = { policy, name, clock, overrides: true } as const;
      const store = index % 2 === 0 ? variant.store : functions.store;
      const onRedis = createLimiter({ ...options, store, timeoutMs: 60_000 });
      const inMemory = createLimiter({ ...options, store: new MemoryStore() });
      let compared = 0;
      let storedUsed = 0;
      let denied = 0;
      let history = '';
      for (let tickIndex = 0; tickIndex < STEPS; tickIndex++) {
        const real = performance.now();
        now += Math.max(Math.round(random.next() * policy.windowMs * 300) / 1000, real - lastReal);
        lastReal = real;
        if (random.next() < 0.1) history = await changeStored(random, [onRedis, inMemory], policy);
        const calls = randomCalls(random, policy);
        const describeTick = () => `seed ${7000 + index}, tick ${tickIndex}, now ${now}, after ${history}`;
        if (!(await compareTick(expiries, onRedis, inMemory, calls, describeTick))) continue;
        compared++;
        const decisions = await Promise.all(calls.map((c) => inMemory.peek(c.identifier)));
        storedUsed += decisions.filter((d) => d.limit !== policy.limit).length;
        denied += decisions.filter((d) => d.reason === 'denied').length;
      }
      assert.ok(compared >= STEPS * 0.95, `${compared} ticks compared`);
      // A run that never met a stored limit or a denial would prove nothing.
      assert.ok(storedUsed > 20, `${storedUsed} decisions under a stored limit`);
      assert.ok(denied > 5, `${denied} decisions denied`);
    });
  });
});

describe('an atomic all() reads what is stored for each limiter', () => {
  test('random stored limits and denials on two policies decided by one script agree with the twins', async () => {
    const random = seeded(99);
    let now = 1_700_000_000_000;
    const clock = () => now;
    const policies = [
      gcra({ limit: 10, periodMs: 1000, burst: 4 }),
      slidingWindow({ limit: 6, windowMs: 1000 }),
    ];
    const make = (store: MemoryStore | Variant['store']) =>
      policies.map((policy, i) =>
        createLimiter({ store, policy, name: `g${i}`, clock, overrides: true, timeoutMs: 60_000 }),
      );
    const onRedis = make(variant.store);
    const inMemory = make(new MemoryStore());
    const combinedRedis = all(onRedis, { atomic: true });
    const combinedMemory = all(inMemory, { atomic: true });
    let stored = 0;
    for (let tick = 0; tick < 400; tick++) {
      now += random.int(0, 300);
      if (random.next() < 0.15) {
        const i = random.int(0, 1);
        await changeStored(random, [onRedis[i] as Limiter, inMemory[i] as Limiter], policies[i] as Policy);
      }
      const identifier = random.pick(IDENTIFIERS);
      const operation = random.next() < 0.8 ? 'limit' : 'peek';
      const expected = await combinedMemory[operation](identifier);
      const actual = await combinedRedis[operation](identifier);
      assert.deepEqual(actual, expected, `tick ${tick}`);
      if (expected.decisions.some((d, i) => d.limit !== (policies[i] as Policy).limit)) stored++;
    }
    assert.ok(stored > 20, `${stored} decisions under a stored limit`);
  });
});
