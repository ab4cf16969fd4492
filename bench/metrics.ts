// What metrics cost: decisions/s with no recorder and with prometheusMetrics(), on the memory store and
// on Redis, in the same run and interleaved rounds. Run alone or from run.ts (metricsOverhead).
//
//   npm run gen && tsc -p tsconfig.json && node --expose-gc build/bench/metrics.js [--quick]
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import {
  createLimiter,
  type Decision,
  MemoryStore,
  type MetricsRecorder,
  RedisStore,
  type Store,
} from '../src/index.js';
import { prometheusMetrics } from '../src/metrics/index.js';
import { BENCH_TIMEOUT_MS, type Contender, SLUICE_POLICIES, type SluicePolicy } from './contenders.js';
import type { Decider } from './load.js';
import { measureInChild, type RaceOptions, race, type Summary } from './race.js';
import { type BenchServer, startBenchServer } from './server.js';

const POLICY = SLUICE_POLICIES.find((p) => p.label === 'fixedWindow') as SluicePolicy;

/** The targets: what metrics may take from decisions/s. */
export const METRICS_OVERHEAD_TARGETS = { memory: 0.1, redis: 0.05 } as const;

type Recording = 'off' | 'prometheus';
const RECORDINGS: readonly Recording[] = ['off', 'prometheus'];

function recorder(recording: Recording): MetricsRecorder | undefined {
  // A registry of its own per run: what a service with a /metrics route holds.
  return recording === 'off' ? undefined : prometheusMetrics({ registry: new Registry() });
}

/** sluice's fixed window on a fresh store of `makeStore`, with or without prometheusMetrics(). */
function contender(idPrefix: string, recording: Recording, makeStore: () => Store): Contender {
  let notFromStore = 0;
  return {
    id: `${idPrefix}${POLICY.label}.metrics-${recording}`,
    library: 'sluice',
    label: `${POLICY.label}, metrics ${recording}`,
    kind: POLICY.kind,
    setup() {
      const metrics = recorder(recording);
      const limiter = createLimiter({
        store: makeStore(),
        policy: POLICY.make(),
        name: 'bench',
        timeoutMs: BENCH_TIMEOUT_MS,
        ...(metrics === undefined ? {} : { metrics }),
      });
      return {
        decide: (identifier: string) => limiter.limit(identifier),
        allowed: (decision: Decision) => {
          if (decision.reason !== undefined) notFromStore++;
          return decision.allowed;
        },
      } as Decider;
    },
    notFromStore: () => notFromStore,
  };
}

/** The memory store, metrics off and on (run in a child process each, by bench/memory-worker.ts). */
export function metricsMemoryContenders(): Contender[] {
  return RECORDINGS.map((recording) => contender('sluice.memory.', recording, () => new MemoryStore()));
}

/** Redis, metrics off and on, on the benchmark's shared client. */
export function metricsRedisContenders(client: Redis): Contender[] {
  return RECORDINGS.map((recording) => contender('sluice.', recording, () => new RedisStore({ client })));
}

/** One store's figures: decisions/s off and on (medians), and what metrics cost (median of the rounds' ratios). */
export interface MetricsOverhead {
  readonly store: 'memory' | 'redis';
  readonly offPerSecond: number;
  readonly onPerSecond: number;
  /** 1 - on/off, the median over rounds of each round's pair. */
  readonly overhead: number;
  readonly roundOverheads: readonly number[];
  readonly target: number;
  readonly met: boolean;
}

function compare(store: 'memory' | 'redis', [off, on]: Summary[]): MetricsOverhead {
  const offRuns = off?.runs ?? [];
  const onRuns = on?.runs ?? [];
  const roundOverheads = offRuns.map((run, i) => 1 - (onRuns[i]?.perSecond ?? 0) / run.perSecond);
  const sorted = [...roundOverheads].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const overhead =
    sorted.length % 2 === 1
      ? (sorted[middle] as number)
      : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  const target = METRICS_OVERHEAD_TARGETS[store];
  return {
    store,
    offPerSecond: off?.perSecond ?? 0,
    onPerSecond: on?.perSecond ?? 0,
    overhead,
    roundOverheads,
    target,
    met: overhead <= target,
  };
}

/** Races metrics off against prometheusMetrics() on both stores. */
export async function metricsOverhead(bench: BenchServer, options: RaceOptions): Promise<MetricsOverhead[]> {
  options.log('Metrics overhead: memory store');
  const memory = await race(bench, metricsMemoryContenders(), {
    ...options,
    measure: (contender, round) => measureInChild(contender, round, options),
  });
  options.log('Metrics overhead: Redis');
  const redis = await race(bench, metricsRedisContenders(bench.client), options);
  return [compare('memory', memory), compare('redis', redis)];
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const bench = await startBenchServer();
  try {
    const rows = await metricsOverhead(bench, {
      rounds: quick ? 2 : 6,
      warmupMs: 300,
      durationMs: quick ? 700 : 1500,
      concurrency: 200,
      identifiers: Array.from({ length: 10_000 }, (_, i) => `user:${i}`),
      log: (line) => console.log(line),
    });
    for (const row of rows) {
      const pct = (value: number): string => `${(value * 100).toFixed(1)}%`;
      console.log(
        `${row.met ? ' ok' : 'NOT'}  ${row.store}: ${Math.round(row.offPerSecond)}/s off, ${Math.round(row.onPerSecond)}/s with prometheusMetrics(): ${pct(row.overhead)} (target <= ${pct(row.target)}; rounds ${row.roundOverheads.map(pct).join(' ')})`,
      );
    }
  } finally {
    await bench.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
