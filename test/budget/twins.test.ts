// Keeps the budget's twins honest: a region's window and bucket scripts, and the ledger's, on a real
// Redis and in memory, replaying the same random calls on the same clock, agree on every field.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { budgetBucketPolicy, budgetLeasePolicy } from '../../src/budget/budget-bucket.js';
import {
  budgetGrantPolicy,
  budgetReleasePolicy,
  budgetSyncPolicy,
  budgetWindowPolicy,
} from '../../src/budget/budget-window.js';
import { ledgerIn, memoryLedgerFields } from '../../src/budget/ledger.js';
import { fixedWindow, MemoryStore, type Store, tokenBucket } from '../../src/index.js';
import type { StoreRequest, StoreResult } from '../../src/types.js';
import { type Connected, connect } from '../helpers/clients.js';
import { type ExpiryWatch, watchExpiries } from '../helpers/expiries.js';
import { seeded } from '../helpers/random.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene, openVariant, type Variant } from '../helpers/suites.js';

let server: RedisServer;
let expiries: ExpiryWatch;
let admin: Connected;
before(async () => {
  server = await startRedis();
  expiries = await watchExpiries(server.port);
  admin = await connect('ioredis', server.port);
});
after(async () => {
  await assertHygiene(admin);
  await admin.close();
  await expiries.close();
  await server.stop();
});

const IDENTIFIERS = ['alice', 'bob', 'c{x}'];

/** A clock for a replay: steps of its own, never slower than real time (Redis expires keys in real time). */
function replayClock(start: number): { now: () => number; step: (ms: number) => void } {
  let now = start;
  let lastReal = performance.now();
  return {
    now: () => now,
    step: (ms) => {
      const real = performance.now();
      now += ms < 0 ? ms : Math.max(ms, real - lastReal);
      lastReal = real;
    },
  };
}

/** The latest time each key was decided at, to tell a clock that stepped back (see compareStep). */
const latest = new Map<string, number>();

/**
 * Decides one request on both stores and compares every field. A key Redis expired in real time
 * while the replay's clock still counts on it makes the step not comparable, and so does a step
 * back in time past a moment the memory store already dropped the key at (Redis keeps it until
 * its real expiry): both forget the key then.
 */
async function compareStep(
  onRedis: Store,
  inMemory: Store,
  request: StoreRequest,
  describeStep: () => string,
): Promise<boolean> {
  const fields = ({ allowed, remaining, resetMs, retryAfterMs }: StoreResult) => ({
    allowed,
    remaining,
    resetMs,
    retryAfterMs,
  });
  const key = onRedis.keyFor(request.name, request.identifier);
  const now = request.now as number;
  const steppedBack = now < (latest.get(key) ?? 0);
  latest.set(key, Math.max(now, latest.get(key) ?? 0));
  const expected = fields(await inMemory.decide(request));
  const actual = fields(await onRedis.decide(request));
  if (JSON.stringify(actual) === JSON.stringify(expected)) return true;
  await expiries.settle();
  if (expiries.expired.has(key) || steppedBack) {
    await onRedis.reset(request.name, request.identifier);
    await inMemory.reset(request.name, request.identifier);
    expiries.clear(key);
    return false;
  }
  assert.deepEqual(actual, expected, `${describeStep()}: ${request.policy.description}`);
  return true;
}

describe("a region's budget scripts: Lua and the twins agree", () => {
  let variant: Variant;
  before(async () => {
    variant = await openVariant('ioredis', 'scripts', server.port, 'twins');
  });
  after(async () => {
    await variant.connected.close();
  });

  // A sliding window's region keeps its previous window's count and weighs it (see budget-window.ts).
  for (const sliding of [false, true]) {
    test(`window decisions and grants, with clocks of a region that disagree${sliding ? ' (sliding)' : ''}`, async () => {
      const global = fixedWindow({ limit: 50, windowMs: 1000 });
      const decisions = budgetWindowPolicy(global, 4, 'budget', sliding);
      // A process that does not hold its floor's lease decides against its grants less the floor.
      const withoutFloor = budgetWindowPolicy(global, 4, 'budget', sliding, true);
      const memory = new MemoryStore();
      const random = seeded(23);
      const clock = replayClock(1_700_000_000_000);
      let compared = 0;
      for (let step = 0; step < 2000; step++) {
        const r = random.next();
        // Mostly small steps forward; sometimes a window or more; sometimes back (another process's clock).
        clock.step(r < 0.7 ? random.int(0, 80) : r < 0.9 ? random.int(200, 2500) : -random.int(1, 600));
        const now = clock.now();
        const identifier = random.pick(IDENTIFIERS);
        const index = Math.floor(now / 1000);
        const grant = random.next() < 0.25;
        const release = !grant && random.next() < 0.1;
        const sync = !grant && !release && random.next() < 0.08;
        const request: StoreRequest = sync
          ? {
              policy: budgetSyncPolicy(index + random.int(-1, 1), 1000, sliding),
              name: 'w',
              identifier,
              operation: 'limit',
              cost: random.int(4, 60),
              now,
            }
          : release
            ? {
                policy: budgetReleasePolicy(index + random.int(-1, 1), 1000, sliding),
                name: 'w',
                identifier,
                operation: 'limit',
                cost: random.int(1, 30),
                now,
              }
            : grant
              ? {
                  policy: budgetGrantPolicy(index + random.int(-1, 1), 1000, sliding),
                  name: 'w',
                  identifier,
                  operation: 'limit',
                  cost: random.int(4, 60),
                  now,
                }
              : {
                  policy: random.next() < 0.3 ? withoutFloor : decisions,
                  name: 'w',
                  identifier,
                  operation: random.pick(['limit', 'limit', 'limit', 'peek', 'refund'] as const),
                  cost: random.int(1, 6),
                  now,
                };
        if (await compareStep(variant.store, memory, request, () => `step ${step}, now ${now}`)) compared++;
      }
      assert.ok(compared > 1900, `${compared} steps compared`);
    });
  }

  test('bucket decisions and leases, with clocks of a region that disagree', async () => {
    const global = tokenBucket({ capacity: 30, refillPerSecond: 12 });
    const tau = 2500;
    const decisions = budgetBucketPolicy(global, tau, 3, 'budget');
    // A process without its floor's lease decides with no floor, on the same state.
    const floorOff = budgetBucketPolicy(global, tau, 0, 'budget');
    const memory = new MemoryStore();
    const random = seeded(29);
    const clock = replayClock(1_700_000_000_000);
    let compared = 0;
    for (let step = 0; step < 2000; step++) {
      const r = random.next();
      clock.step(r < 0.7 ? random.int(0, 120) : r < 0.92 ? random.int(300, 6000) : -random.int(1, 400));
      const now = clock.now();
      const identifier = random.pick(IDENTIFIERS);
      const lease = random.next() < 0.2;
      const request: StoreRequest = lease
        ? {
            policy: budgetLeasePolicy(now + random.int(-200, 3000), tau),
            name: 'b',
            identifier,
            operation: 'limit',
            cost: random.int(0, 27),
            now,
          }
        : {
            policy: random.next() < 0.25 ? floorOff : decisions,
            name: 'b',
            identifier,
            operation: random.pick(['limit', 'limit', 'limit', 'peek', 'refund'] as const),
            cost: random.int(1, 5),
            now,
          };
      if (await compareStep(variant.store, memory, request, () => `step ${step}, now ${now}`)) compared++;
    }
    assert.ok(compared > 1900, `${compared} steps compared`);
  });
});

/** The ledger's fields as Redis holds them, as numbers (the twin keeps numbers). */
async function redisFields(key: string): Promise<Record<string, number>> {
  const flat = (await admin.command('HGETALL', key)) as string[] | Record<string, string>;
  const entries = Array.isArray(flat)
    ? Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]] as [string, string])
    : Object.entries(flat);
  return Object.fromEntries(entries.map(([name, value]) => [name, Number(value)]).sort());
}

function sortedFields(fields: ReadonlyMap<string, number> | undefined): Record<string, number> {
  return Object.fromEntries([...(fields ?? new Map<string, number>())].sort());
}

describe('the ledger: Lua and the twins agree, replies and stored fields', () => {
  for (const sliding of [false, true]) {
    test(`windows (${sliding ? 'sliding' : 'fixed'}): three regions asking on one clock`, async () => {
      const variant = await openVariant('ioredis', 'scripts', server.port, `lw${sliding ? 's' : 'f'}`);
      const memoryStore = new MemoryStore({ prefix: `lw${sliding ? 's' : 'f'}` });
      try {
        const onRedis = ledgerIn(variant.store);
        const inMemory = ledgerIn(memoryStore);
        const random = seeded(sliding ? 31 : 37);
        let now = Math.floor(Date.now() / 1000) * 1000 + 5_000_000;
        // Each rule must have had its turn: chunks, shares claimed ahead, and chunks cut short by the limit.
        const seen = { chunk: 0, share: 0, short: 0 };
        for (let step = 0; step < 600; step++) {
          now += random.next() < 0.85 ? random.int(0, 90) : random.int(300, 1500);
          const region = random.int(0, 2);
          const settings = {
            region,
            regions: 3,
            windowMs: 1000,
            limit: 300,
            floor: sliding ? 10 : 20,
            reservePermille: 200,
            sliding,
            index: Math.floor((now + random.int(-30, 30)) / 1000),
            // Some calls name regions whose floor is out of the sums for some windows (a lapse).
            gaps:
              random.next() < 0.5
                ? undefined
                : [0, 1, 2].map(() => {
                    if (random.next() < 0.4) return { out: -1, back: -1 };
                    const out = Math.floor(now / 1000) + random.int(-2, 2);
                    return { out, back: out + random.int(0, 3) };
                  }),
          };
          const identifiers = IDENTIFIERS.slice(0, random.int(1, 3));
          const keys = identifiers.map((id) => onRedis.keyFor('api', id));
          const requests = identifiers.map(() => ({
            demand: random.int(0, 120),
            want: random.next() < 0.5 ? random.int(1, 90) : 0,
            claim: random.next() < 0.3,
            release: random.next() < 0.15 ? random.int(1, 40) : 0,
            before: random.next() < 0.2 ? random.int(0, 100) : -1,
          }));
          const expected = await inMemory.windows(keys, settings, requests, now);
          const actual = await onRedis.windows(keys, settings, requests, now);
          assert.deepEqual(
            actual,
            expected,
            `step ${step}, now ${now}, ${JSON.stringify({ settings, requests })}`,
          );
          actual.forEach((reply, i) => {
            if (reply.gained > 0) seen.chunk++;
            if (reply.next > settings.floor) seen.share++;
            if (reply.gained < (requests[i]?.want ?? 0)) seen.short++;
          });
          for (const key of keys) {
            const memoryFields = memoryLedgerFields(memoryStore, key, now);
            assert.deepEqual(
              await redisFields(key),
              sortedFields(memoryFields),
              `step ${step}: fields of ${key}`,
            );
          }
        }
        assert.ok(seen.chunk > 50 && seen.share > 50 && seen.short > 50, JSON.stringify(seen));
      } finally {
        await variant.connected.close();
      }
    });
  }

  test('region leases: three regions renewing, lapsing and coming back on one clock', async () => {
    const variant = await openVariant('ioredis', 'scripts', server.port, 'lr');
    const memoryStore = new MemoryStore({ prefix: 'lr' });
    try {
      const onRedis = ledgerIn(variant.store);
      const inMemory = ledgerIn(memoryStore);
      const random = seeded(43);
      let now = 1_800_000_000_000 + random.int(0, 999);
      const key = onRedis.regionsKeyFor('api');
      let lapses = 0;
      for (let step = 0; step < 400; step++) {
        // Mostly within a lease; sometimes long enough for the others' leases to lapse (less than the
        // key's life, 3 s: Redis expires it in real time).
        now += random.next() < 0.85 ? random.int(0, 300) : random.int(1000, 2500);
        // Buckets keep their gaps in windows of half a lease; with windows of 1 ms, epoch-sized gaps
        // come back whole.
        const settings = {
          region: random.int(0, 2),
          regions: 3,
          leaseMs: 900,
          windowMs: random.next() < 0.3 ? 1 : 1000,
        };
        const expected = await inMemory.regions(key, settings, now);
        const actual = await onRedis.regions(key, settings, now);
        assert.deepEqual(actual, expected, `step ${step}, now ${now}, ${JSON.stringify(settings)}`);
        lapses += actual.gaps.filter((gap) => gap.out >= 0).length;
        assert.deepEqual(
          await redisFields(key),
          sortedFields(memoryLedgerFields(memoryStore, key, now)),
          `step ${step}: fields`,
        );
      }
      assert.ok(lapses > 100, `${lapses} gaps answered`);
    } finally {
      await variant.connected.close();
    }
  });

  test('bucket: three regions leasing on one clock', async () => {
    const variant = await openVariant('ioredis', 'scripts', server.port, 'lb');
    const memoryStore = new MemoryStore({ prefix: 'lb' });
    try {
      const onRedis = ledgerIn(variant.store);
      const inMemory = ledgerIn(memoryStore);
      const random = seeded(41);
      let now = 1_800_000_000_000 + random.int(0, 999);
      let leases = 0;
      let lent = 0;
      for (let step = 0; step < 600; step++) {
        now += random.next() < 0.85 ? random.int(0, 150) : random.int(500, 4000);
        const settings = {
          region: random.int(0, 2),
          regions: 3,
          leaseMs: 2000,
          pool: 90,
          tau: 3333.3333333333335,
          floor: 3,
          // Some callers do not hold their floor (they are leased their demand's whole capacity).
          holdsFloor: step % 3 === 0 ? false : step % 3 === 1 ? true : undefined,
          // Some calls name regions in their floor's gap (windows of half a lease): their floors are lent.
          gaps:
            random.next() < 0.5
              ? undefined
              : [0, 1, 2].map(() => {
                  if (random.next() < 0.4) return { out: -1, back: -1 };
                  const out = Math.floor(now / 1000) + random.int(-3, 1);
                  return { out, back: out + random.int(0, 4) };
                }),
        };
        const identifiers = IDENTIFIERS.slice(0, random.int(1, 3));
        const keys = identifiers.map((id) => onRedis.keyFor('api', id));
        const units = identifiers.map(() => random.int(0, 40));
        const expected = await inMemory.bucket(keys, settings, units, now);
        const actual = await onRedis.bucket(keys, settings, units, now);
        leases += actual.filter((reply) => reply.lease > 0).length;
        // A lease past the pool less the others' reservations: only a lent floor makes room for it.
        lent += actual.filter((reply) => reply.leased > settings.pool).length;
        assert.deepEqual(
          actual,
          expected,
          `step ${step}, now ${now}, ${JSON.stringify({ settings, units })}`,
        );
        for (const key of keys) {
          assert.deepEqual(
            await redisFields(key),
            sortedFields(memoryLedgerFields(memoryStore, key, now)),
            `step ${step}: fields of ${key}`,
          );
        }
      }
      assert.ok(leases > 100, `${leases} leases granted`);
      assert.ok(lent > 20, `${lent} replies with lent floors leased`);
    } finally {
      await variant.connected.close();
    }
  });
});
