// Keeps the concurrency twins honest: random acquisitions, looks, releases and extends decided by the
// Lua script on a real server and by the TypeScript twin in the memory store, on one clock, must agree
// on every field (lease ids aside, which each side draws at random), alone and inside all().
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  all,
  type CombinedLimiter,
  concurrency,
  createLimiter,
  type Decision,
  fixedWindow,
  type Lease,
  type Limiter,
  MemoryStore,
  type Policy,
  RedisStore,
} from '../../src/index.js';
import { type ClusterClient, connectCluster } from '../helpers/cluster-clients.js';
import { type ExpiryWatch, watchExpiries } from '../helpers/expiries.js';
import { type Random, seeded } from '../helpers/random.js';
import { type RedisCluster, startCluster } from '../helpers/redis-cluster.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene, EXACT, openVariant, VARIANTS, type Variant } from '../helpers/suites.js';

const POLICIES: ReadonlyArray<() => Policy> = [
  () => concurrency({ limit: 3, leaseMs: 1000 }),
  () => concurrency({ limit: 12, leaseMs: 250 }),
];
const STEPS = 800;
const IDENTIFIERS = ['alice', 'b{o}b', 'ünï'];

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

/** A lease held on both sides: the same acquisition, with each side's own id. */
interface Held {
  readonly identifier: string;
  readonly redis: Lease;
  readonly memory: Lease;
}

type Step =
  | { readonly kind: 'limit' | 'peek'; readonly identifier: string; readonly cost: number }
  | { readonly kind: 'release' | 'extend'; readonly held: Held; readonly leaseMs?: number };

/** A decision with its lease id replaced by a mark: ids are random per side, everything else must agree. */
function comparable(decision: Decision): unknown {
  return decision.lease === undefined ? decision : { ...decision, lease: { ...decision.lease, id: 'id' } };
}

function run(limiter: Limiter, step: Step, side: 'redis' | 'memory'): Promise<Decision> {
  if (!('held' in step)) return limiter[step.kind](step.identifier, { cost: step.cost });
  const lease = step.held[side];
  if (step.kind === 'release') return limiter.release(step.held.identifier, lease);
  return limiter.extend(step.held.identifier, lease, step.leaseMs);
}

function randomStep(random: Random, policy: Policy, held: readonly Held[]): Step {
  const r = random.next();
  const pick = held.length === 0 ? undefined : held[random.int(0, held.length - 1)];
  if (pick !== undefined && r < 0.3) return { kind: 'release', held: pick };
  if (pick !== undefined && r < 0.4) {
    return random.next() < 0.5
      ? { kind: 'extend', held: pick }
      : { kind: 'extend', held: pick, leaseMs: random.int(1, policy.leaseMs ?? 1) };
  }
  const cost = random.next() < 0.7 ? 1 : random.int(1, policy.maxCost);
  return { kind: r < 0.85 ? 'limit' : 'peek', identifier: random.pick(IDENTIFIERS), cost };
}

/**
 * Runs one tick's steps on both sides and compares them. A tick that touched a key the server
 * expired in real time is not compared (see test/helpers/twins.ts): both sides forget it.
 */
async function tick(
  onRedis: Limiter,
  inMemory: Limiter,
  steps: readonly Step[],
  held: Held[],
  describeTick: () => string,
  watch: ExpiryWatch | undefined,
): Promise<boolean> {
  const fromMemory = await Promise.all(steps.map((step) => run(inMemory, step, 'memory')));
  const fromRedis = await Promise.all(steps.map((step) => run(onRedis, step, 'redis')));
  const touched = [
    ...new Set(steps.map((step) => ('held' in step ? step.held.identifier : step.identifier))),
  ];
  if (
    watch !== undefined &&
    JSON.stringify(fromRedis.map(comparable)) !== JSON.stringify(fromMemory.map(comparable))
  ) {
    const expiries = watch;
    await expiries.settle();
    const keys = touched.map((identifier) => onRedis.store.keyFor(onRedis.name, identifier));
    if (keys.some((key) => expiries.expired.has(key))) {
      for (const identifier of touched) {
        await onRedis.reset(identifier);
        await inMemory.reset(identifier);
      }
      for (const key of keys) expiries.clear(key);
      held.splice(0, held.length, ...held.filter((lease) => !touched.includes(lease.identifier)));
      return false;
    }
    assert.deepEqual(fromRedis.map(comparable), fromMemory.map(comparable), describeTick());
  }
  steps.forEach((step, i) => {
    const redisLease = fromRedis[i]?.lease;
    const memoryLease = fromMemory[i]?.lease;
    if (step.kind === 'limit' && redisLease !== undefined && memoryLease !== undefined) {
      held.push({ identifier: step.identifier, redis: redisLease, memory: memoryLease });
    }
    if (step.kind === 'release' && fromRedis[i]?.released === true) held.splice(held.indexOf(step.held), 1);
  });
  return true;
}

for (const { kind, mode } of VARIANTS) {
  describe(`concurrency(): Lua on the server (${kind}, ${mode}) and the TypeScript twin agree`, () => {
    let variant: Variant;
    before(async () => {
      variant = await openVariant(kind, mode, server.port, `lease-${kind}-${mode}`);
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
        const seed = 7000 + 100 * index + VARIANTS.findIndex((v) => v.kind === kind && v.mode === mode);
        await randomRun(variant.store, policy, `c${index}`, seed, expiries);
      });
    });
  });
}

/**
 * STEPS ticks of random steps on `store` and on a memory store, compared. Without `watch` (a cluster,
 * whose nodes expire keys on their own), every tick is compared.
 */
async function randomRun(
  store: Variant['store'],
  policy: Policy,
  name: string,
  seed: number,
  watch: ExpiryWatch | undefined,
): Promise<void> {
  const random = seeded(seed);
  let now = 1_700_000_000_000 + random.next();
  let lastReal = performance.now();
  const clock = () => now;
  const onRedis = createLimiter({ store, policy, name, clock, ...EXACT });
  const inMemory = createLimiter({ store: new MemoryStore(), policy, name, clock });
  const held: Held[] = [];
  let compared = 0;
  let released = 0;
  for (let tickIndex = 0; tickIndex < STEPS; tickIndex++) {
    const r = random.next();
    let step =
      r < 0.3 ? 0 : r < 0.8 ? Math.round(random.next() * 50_000) / 1000 : random.int(0, 2 * policy.windowMs);
    // The server expires keys in real time: the test clock never runs slower (see differential.test.ts).
    const real = performance.now();
    step = Math.max(step, real - lastReal);
    now += step;
    lastReal = real;
    const count = random.next() < 0.25 ? random.int(2, 6) : 1;
    const steps = Array.from({ length: count }, () => randomStep(random, policy, held));
    // Two steps on one lease in one tick would race on either side alike, but drop one to keep it plain.
    const unique = steps.filter(
      (s, i) => !('held' in s) || steps.findIndex((t) => 'held' in t && t.held === s.held) === i,
    );
    released += unique.filter((s) => s.kind === 'release').length;
    const describeTick = () => `seed ${seed}, tick ${tickIndex}, now ${now}`;
    if (await tick(onRedis, inMemory, unique, held, describeTick, watch)) compared++;
  }
  assert.ok(compared >= STEPS * 0.95, `${STEPS - compared} ticks skipped for keys expired early`);
  assert.ok(released > STEPS / 10, 'releases were exercised');
}

describe('concurrency() on a Redis Cluster (ioredis; keys tagged by identifier) and the TypeScript twin agree', () => {
  let cluster: RedisCluster;
  let client: ClusterClient;
  before(async () => {
    cluster = await startCluster();
    client = await connectCluster('ioredis', cluster.rootNodes);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });
  for (const mode of ['scripts', 'functions'] as const) {
    test(`${mode}: ${STEPS} random ticks over identifiers on several nodes`, async () => {
      const store = new RedisStore({ client: client.client, mode, prefix: `lease-cluster-${mode}` });
      await randomRun(store, (POLICIES[0] as () => Policy)(), 'c', 7500 + mode.length, undefined);
    });
  }
});

describe('all([rate, concurrency]) on the server and in memory agree', () => {
  for (const mode of ['scripts', 'functions'] as const) {
    test(`ioredis, ${mode}: a refusal by either takes nothing from the other`, async () => {
      const variant = await openVariant('ioredis', mode, server.port, `lease-all-${mode}`);
      const memory = new MemoryStore();
      try {
        let now = 1_700_000_000_000;
        const clock = () => now;
        const group = (store: Variant['store'] | MemoryStore): CombinedLimiter =>
          all([
            createLimiter({
              store,
              policy: fixedWindow({ limit: 6, windowMs: 2000 }),
              name: 'rate',
              clock,
              ...EXACT,
            }),
            createLimiter({
              store,
              policy: concurrency({ limit: 3, leaseMs: 700 }),
              name: 'slots',
              clock,
              ...EXACT,
            }),
          ]);
        const onRedis = group(variant.store);
        const inMemory = group(memory);
        const random = seeded(31 + mode.length);
        const held: Array<{ redis: Lease; memory: Lease }> = [];
        let refusedByRate = 0;
        let refusedBySlots = 0;
        for (let step = 0; step < 300; step++) {
          now += random.int(0, 150);
          if (held.length > 0 && random.next() < 0.35) {
            const [lease] = held.splice(random.int(0, held.length - 1), 1);
            const [a, b] = await Promise.all([
              onRedis.limiters[1]?.release('k', lease?.redis as Lease),
              inMemory.limiters[1]?.release('k', lease?.memory as Lease),
            ]);
            assert.deepEqual(a, b, `release at step ${step}`);
            continue;
          }
          const [a, b] = await Promise.all([onRedis.limit('k'), inMemory.limit('k')]);
          assert.deepEqual(
            { ...a, decisions: a.decisions.map(comparable) },
            { ...b, decisions: b.decisions.map(comparable) },
            `step ${step}`,
          );
          const redisLease = a.decisions[1]?.lease;
          const memoryLease = b.decisions[1]?.lease;
          if (a.allowed && redisLease && memoryLease) held.push({ redis: redisLease, memory: memoryLease });
          if (!a.allowed) {
            assert.equal(redisLease, undefined, 'a refused group holds no slot');
            if (a.deniedBy.includes('rate')) refusedByRate++;
            else refusedBySlots++;
          }
        }
        assert.ok(
          refusedByRate > 5 && refusedBySlots > 5,
          `both refusals exercised (${refusedByRate}, ${refusedBySlots})`,
        );
      } finally {
        memory.close();
        await variant.connected.close();
      }
    });
  }
});
