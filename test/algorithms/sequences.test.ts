// Known sequences of decisions (a fixed window's counts, a sliding log's and a token bucket's timelines),
// replayed on a real Redis (both clients, both modes) and in memory.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  fixedWindow,
  MemoryStore,
  type Store,
  slidingLog,
  tokenBucket,
} from '../../src/index.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene, openVariant, VARIANTS, type Variant } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

// A busy machine must not turn a slow reply into a timeout decision: these sequences are exact.
const PATIENT_MS = 60_000;

async function fixedWindowCounts(store: Store, name: string): Promise<number[]> {
  const limiter = createLimiter({
    store,
    policy: fixedWindow({ limit: 100, windowMs: 3_600_000 }),
    name,
    timeoutMs: PATIENT_MS,
  });
  const counts: number[] = [];
  for (let i = 0; i < 4; i++) {
    const decision = await limiter.limit('u1');
    assert.equal(decision.allowed, true);
    counts.push(decision.limit - decision.remaining);
  }
  return counts;
}

async function slidingLogTimeline(store: Store, name: string): Promise<boolean[]> {
  let now = 1_700_000_000_000;
  const start = now;
  const limiter = createLimiter({
    store,
    policy: slidingLog({ limit: 3, windowMs: 60_000 }),
    name,
    clock: () => now,
    timeoutMs: PATIENT_MS,
  });
  const allowed: boolean[] = [];
  for (const at of [0, 100, 200, 300, 59_999, 60_001, 60_150]) {
    now = start + at;
    allowed.push((await limiter.limit('client')).allowed);
  }
  return allowed;
}

async function tokenBucketRun(store: Store, name: string): Promise<Array<[number, number]>> {
  // A clock of the test's: on the server's, seven calls on a loaded machine may span a refill, and a
  // one-second sleep may last long enough for a second one.
  let now = 1_700_000_000_000;
  const limiter = createLimiter({
    store,
    policy: tokenBucket({ capacity: 5, refillPerSecond: 2 }),
    name,
    clock: () => now,
    timeoutMs: PATIENT_MS,
  });
  const pairs: Array<[number, number]> = [];
  for (let i = 0; i < 7; i++) {
    const d = await limiter.limit('42');
    pairs.push([d.allowed ? 1 : 0, d.remaining]);
  }
  now += 1000;
  const d = await limiter.limit('42');
  pairs.push([d.allowed ? 1 : 0, d.remaining]);
  return pairs;
}

const SLIDING_LOG = [true, true, true, false, false, true, true];
const TOKEN_BUCKET: Array<[number, number]> = [
  [1, 4],
  [1, 3],
  [1, 2],
  [1, 1],
  [1, 0],
  [0, 0],
  [0, 0],
  [1, 1],
];

for (const { kind, mode } of VARIANTS) {
  describe(`known sequences on Redis, ${kind}, ${mode}`, () => {
    let variant: Variant;
    before(async () => {
      variant = await openVariant(kind, mode, server.port, `sequences-${kind}-${mode}`);
    });
    after(async () => {
      try {
        await assertHygiene(variant.connected);
      } finally {
        await variant.connected.close();
      }
    });

    test('fixed window counts 1, 2, 3, 4 with a positive PTTL', async () => {
      // The four counts and the PTTL read after them must fall in one hour's window (its key expires with it).
      await clearOfWindowEnd(3_600_000, 10_000);
      assert.deepEqual(await fixedWindowCounts(variant.store, 'fixed'), [1, 2, 3, 4]);
      const pttl = Number(await variant.connected.command('PTTL', variant.store.keyFor('fixed', 'u1')));
      assert.ok(pttl > 0 && pttl <= 3_600_000, `PTTL ${pttl}`);
    });

    test('sliding log, 3 per 60 000 ms: allowed at 0, 100, 200; denied at 300, 59 999; allowed at 60 001, 60 150', async () => {
      assert.deepEqual(await slidingLogTimeline(variant.store, 'log'), SLIDING_LOG);
    });

    test('token bucket, capacity 5 at 2/s: (1,4) (1,3) (1,2) (1,1) (1,0) (0,0) (0,0), then (1,1) a second later', async () => {
      assert.deepEqual(await tokenBucketRun(variant.store, 'bucket'), TOKEN_BUCKET);
    });
  });
}

describe('known sequences in memory', () => {
  test('fixed window counts 1, 2, 3, 4', async () => {
    // The four counts must fall in one hour's window (on Date.now()).
    await clearOfWindowEnd(3_600_000, 10_000);
    assert.deepEqual(await fixedWindowCounts(new MemoryStore(), 'fixed'), [1, 2, 3, 4]);
  });
  test('sliding log timeline', async () => {
    assert.deepEqual(await slidingLogTimeline(new MemoryStore(), 'log'), SLIDING_LOG);
  });
  test('token bucket run', async () => {
    assert.deepEqual(await tokenBucketRun(new MemoryStore(), 'bucket'), TOKEN_BUCKET);
  });
});
