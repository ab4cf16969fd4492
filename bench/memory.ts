// Bytes of Redis memory per tracked identifier (MEMORY USAGE over a sample of keys), and per entry
// of the sliding log, for each sluice algorithm and each peer.
import type { Redis } from 'ioredis';
import { createLimiter, RedisStore, SLIDING_LOG_MAX_LIMIT, slidingLog } from '../src/index.js';
import type { Contender } from './contenders.js';
import type { BenchServer } from './server.js';

export interface MemoryRecord {
  readonly id: string;
  readonly library: string;
  readonly label: string;
  readonly kind: string;
  /** Keys one identifier occupies. */
  readonly keysPerIdentifier: number;
  /** Mean of MEMORY USAGE (SAMPLES 0) over the sampled keys, times keys per identifier. */
  readonly bytesPerIdentifier: number;
  /** Growth of INFO used_memory per identifier: adds the expiry entry and the hash tables' growth. */
  readonly usedMemoryPerIdentifier: number;
  /** A sample key, to show the layout (key length counts). */
  readonly sampleKey: string;
}

export interface SlidingLogEntryRecord {
  /** Bytes per entry while the log is a listpack (up to 128 entries). */
  readonly listpackBytesPerEntry: number;
  /** Bytes per entry once it is a skiplist (1 000 entries, the largest log). */
  readonly skiplistBytesPerEntry: number;
}

async function usage(redis: Redis, keys: readonly string[]): Promise<number[]> {
  const pipeline = redis.pipeline();
  for (const key of keys) pipeline.memory('USAGE', key, 'SAMPLES', 0);
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([error, value]) => {
    if (error !== null) throw error;
    return Number(value);
  });
}

async function allKeys(redis: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/** One decision for each identifier, then the bytes the contender keeps per identifier. */
export async function memoryPerIdentifier(
  bench: BenchServer,
  contender: Contender,
  identifiers: readonly string[],
  sampleSize: number,
): Promise<MemoryRecord> {
  await bench.flush();
  const before = await bench.usedMemory();
  const decider = contender.setup();
  // Once per identifier: a run long enough to reach each, stopped by count rather than time.
  let next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < identifiers.length) await decider.decide(identifiers[next++] as string);
    }),
  );
  const after = await bench.usedMemory();
  const keys = await allKeys(bench.admin);
  const sample = keys.slice(0, sampleSize);
  const sizes = await usage(bench.admin, sample);
  const mean = sizes.reduce((a, b) => a + b, 0) / Math.max(1, sizes.length);
  const keysPerIdentifier = keys.length / identifiers.length;
  return {
    id: contender.id,
    library: contender.library,
    label: contender.label,
    kind: contender.kind,
    keysPerIdentifier,
    bytesPerIdentifier: mean * keysPerIdentifier,
    usedMemoryPerIdentifier: (after - before) / identifiers.length,
    sampleKey: sample[0] ?? '',
  };
}

/** The sliding log's cost per entry: logs of 1, 101 and 1 000 entries (the ceiling), compared. */
export async function slidingLogPerEntry(bench: BenchServer): Promise<SlidingLogEntryRecord> {
  await bench.flush();
  const store = new RedisStore({ client: bench.client, prefix: 'rl' });
  const limiter = createLimiter({
    store,
    policy: slidingLog({ limit: SLIDING_LOG_MAX_LIMIT, windowMs: 600_000 }),
    name: 'log',
  });
  const sizes = new Map<number, number>();
  for (const entries of [1, 101, SLIDING_LOG_MAX_LIMIT]) {
    const ids = Array.from({ length: 20 }, (_, i) => `entries-${entries}-${i}`);
    for (const id of ids) {
      // One entry per unit: a cost of `entries` writes them in one call.
      await limiter.limit(id, { cost: entries });
    }
    const measured = await usage(
      bench.admin,
      ids.map((id) => store.keyFor('log', id)),
    );
    sizes.set(entries, measured.reduce((a, b) => a + b, 0) / measured.length);
  }
  const one = sizes.get(1) ?? 0;
  return {
    listpackBytesPerEntry: ((sizes.get(101) ?? 0) - one) / 100,
    skiplistBytesPerEntry: ((sizes.get(SLIDING_LOG_MAX_LIMIT) ?? 0) - one) / (SLIDING_LOG_MAX_LIMIT - 1),
  };
}
