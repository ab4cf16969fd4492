// Bytes of Redis memory per tracked identifier (MEMORY USAGE over a sample of keys), and per entry
// of the sliding log, for each sluice algorithm and each peer; and for sluice at a million identifiers.
import type { Redis } from 'ioredis';
import { createLimiter, gcra, RedisStore, SLIDING_LOG_MAX_LIMIT, slidingLog } from '../src/index.js';
import {
  type Contender,
  peersOnRedis,
  SLUICE_POLICIES,
  type SluicePolicy,
  sluiceRedis,
} from './contenders.js';
import { count, notRun, table } from './format.js';
import type { Section } from './section.js';
import type { BenchServer } from './server.js';

export interface MemoryRecord {
  readonly id: string;
  /** Identifiers decided (one decision each). */
  readonly identifiers: number;
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

/** Up to `size` keys of the database, and how many it holds. */
async function sampleKeys(redis: Redis, size: number): Promise<{ keys: string[]; total: number }> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0' && keys.length < size);
  return { keys: keys.slice(0, size), total: await redis.dbsize() };
}

/** One decision for each identifier, then the bytes the contender keeps per identifier. */
export async function memoryPerIdentifier(
  bench: BenchServer,
  contender: Contender,
  identifiers: number,
  sampleSize: number,
): Promise<MemoryRecord> {
  await bench.flush();
  const before = await bench.usedMemory();
  const decider = contender.setup();
  // Once per identifier: a run long enough to reach each, stopped by count rather than time.
  let next = 0;
  await Promise.all(
    Array.from({ length: 200 }, async () => {
      while (next < identifiers) await decider.decide(`user:${next++}`);
    }),
  );
  const after = await bench.usedMemory();
  const { keys: sample, total } = await sampleKeys(bench.admin, sampleSize);
  const sizes = await usage(bench.admin, sample);
  const mean = sizes.reduce((a, b) => a + b, 0) / Math.max(1, sizes.length);
  const keysPerIdentifier = total / identifiers;
  return {
    id: contender.id,
    identifiers,
    library: contender.library,
    label: contender.label,
    kind: contender.kind,
    keysPerIdentifier,
    bytesPerIdentifier: mean * keysPerIdentifier,
    usedMemoryPerIdentifier: (after - before) / identifiers,
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

export interface MemoryResult {
  /** Every contender at the race's identifier count. */
  readonly records: MemoryRecord[];
  /** sluice's algorithms at a million identifiers (a hundred thousand in a quick run). */
  readonly large: MemoryRecord[];
  readonly slidingLogEntry: SlidingLogEntryRecord;
}

// Day-long periods: one decision's state must outlive the section (a 1-minute GCRA forgets an identifier after 60 ms).
const DAY_MS = 86_400_000;

// GCRA keeps a TAT of whole microseconds as an integer; 7 per day has an interval that is not one.
const UNEVEN: SluicePolicy = {
  label: 'gcra (7 per day: a decimal TAT)',
  kind: 'gcra',
  make: (w = DAY_MS) => gcra({ limit: 7, periodMs: w }),
};

function memoryTable(records: readonly MemoryRecord[]): string {
  return table(
    [
      'contender',
      'identifiers',
      'keys per identifier',
      'MEMORY USAGE bytes/identifier',
      'used_memory growth bytes/identifier',
      'sample key',
    ],
    records.map((m) => [
      `${m.library} ${m.label}`,
      count(m.identifiers),
      m.keysPerIdentifier.toFixed(2),
      m.bytesPerIdentifier.toFixed(1),
      m.usedMemoryPerIdentifier.toFixed(1),
      `\`${m.sampleKey}\``,
    ]),
  );
}

export const memorySection: Section<MemoryResult> = {
  name: 'memory',
  async run({ quick, settings, bench, chosen, log }) {
    log('Redis memory per identifier');
    const client = bench.client;
    const measureAll = async (contenders: Contender[], identifiers: number): Promise<MemoryRecord[]> => {
      const records: MemoryRecord[] = [];
      for (const contender of chosen(contenders)) {
        const record = await memoryPerIdentifier(bench, contender, identifiers, quick ? 200 : 1000);
        log(
          `  ${contender.id.padEnd(34)} ${count(identifiers).padStart(9)} identifiers  ${record.bytesPerIdentifier.toFixed(1)} bytes/identifier`,
        );
        records.push(record);
      }
      return records;
    };
    const records = await measureAll(
      [
        ...[...SLUICE_POLICIES, UNEVEN].map((p) => sluiceRedis(client, p, undefined, DAY_MS)),
        ...peersOnRedis(client, DAY_MS),
      ],
      settings.identifiers,
    );
    const large = await measureAll(
      SLUICE_POLICIES.map((p) => sluiceRedis(client, p, undefined, DAY_MS)),
      quick ? 100_000 : 1_000_000,
    );
    const slidingLogEntry = await slidingLogPerEntry(bench);
    await bench.flush();
    return { records, large, slidingLogEntry };
  },
  targets({ large }) {
    return ['fixedWindow', 'gcra', 'tokenBucket'].flatMap((label) => {
      const row = large.find((r) => r.id === `sluice.${label}`);
      if (row === undefined) return [];
      return [
        {
          target: `Redis, ${label}: ≤ 100 bytes of Redis memory per identifier at ${count(row.identifiers)} identifiers (MEMORY USAGE)`,
          measured: `${row.bytesPerIdentifier.toFixed(1)} bytes (used_memory growth ${row.usedMemoryPerIdentifier.toFixed(1)})`,
          met: row.bytesPerIdentifier <= 100,
        },
      ];
    });
  },
  render({ records, large, slidingLogEntry: entry }) {
    if (records.length === 0 && large.length === 0) return notRun('Redis memory per identifier');
    return [
      '## Redis memory per identifier',
      '',
      'One decision for each identifier (policies with day-long periods, so nothing expires meanwhile), then `MEMORY USAGE <key> SAMPLES 0` over a sample of keys ' +
        "(it counts the key, the value and the main table's entry, not the expiry entry); the growth of `used_memory` per identifier adds the expiry entry and the hash tables.",
      '',
      memoryTable([...records, ...large]),
      '',
      `Sliding log, per entry: ${entry.listpackBytesPerEntry.toFixed(1)} bytes while the sorted set is a listpack (up to 128 entries, \`zset-max-listpack-entries\`), ` +
        `${entry.skiplistBytesPerEntry.toFixed(1)} bytes once it is a skiplist (1 000 entries, the ceiling).`,
      '',
    ];
  },
};
