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
import { count, table } from './format.js';
import { type Decider, median } from './load.js';
import { measureInChild, type RaceOptions, race, type Summary } from './race.js';
import type { Section } from './section.js';
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

/** The memory store, metrics off and on (run in a child process each, by bench/worker.ts). */
export function metricsMemoryContenders(): Contender[] {
  return RECORDINGS.map((recording) => contender('sluice.memory.', recording, () => new MemoryStore()));
}

/** What bench/worker.ts finds here for a job that names this module. */
export const inProcessContenders = metricsMemoryContenders;

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
  /**
   * The same from the CPU time each run's process spent per decision (1 - off/on): steadier on a
   * shared machine, where other work takes turns on the cores. Absent from older results files.
   */
  readonly cpuOverhead?: number;
  readonly cpuRoundOverheads?: readonly number[];
  readonly target: number;
  readonly met: boolean;
}

function compare(store: 'memory' | 'redis', [off, on]: Summary[]): MetricsOverhead {
  const offRuns = off?.runs ?? [];
  const onRuns = on?.runs ?? [];
  const roundOverheads = offRuns.map((run, i) => 1 - (onRuns[i]?.perSecond ?? 0) / run.perSecond);
  const overhead = median(roundOverheads);
  const cpuRoundOverheads = offRuns.map(
    (run, i) => 1 - run.cpuUsecPerDecision / (onRuns[i]?.cpuUsecPerDecision ?? Number.NaN),
  );
  const target = METRICS_OVERHEAD_TARGETS[store];
  return {
    store,
    offPerSecond: off?.perSecond ?? 0,
    onPerSecond: on?.perSecond ?? 0,
    overhead,
    roundOverheads,
    cpuOverhead: median(cpuRoundOverheads),
    cpuRoundOverheads,
    target,
    met: overhead <= target,
  };
}

/** Races metrics off against prometheusMetrics() on both stores. */
export async function metricsOverhead(bench: BenchServer, options: RaceOptions): Promise<MetricsOverhead[]> {
  options.log('Metrics overhead: memory store');
  const inChild = { ...options, precomputed: false, module: 'metrics' };
  const memory = await race(bench, metricsMemoryContenders(), {
    ...options,
    measure: (contender, round) => measureInChild(contender, round, inChild),
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
      identifiers: 10_000,
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

/** `npm run bench`'s section: the overhead on both stores, checked against the targets. */
export const section: Section<MetricsOverhead[]> = {
  name: 'metrics',
  run: ({ quick, settings, bench, filtered }) =>
    filtered
      ? Promise.resolve([])
      : metricsOverhead(bench, {
          // The overhead is a few percent of a decision that varies more than that from run to
          // run on a shared machine: eight pairs make the median hold still.
          rounds: quick ? 2 : 8,
          warmupMs: 300,
          durationMs: quick ? 700 : 1500,
          concurrency: settings.concurrency,
          identifiers: settings.identifiers,
          log: (line) => console.log(line),
        }),
  targets: (rows) =>
    rows.map((row) => ({
      target: `Metrics, ${row.store} store: prometheusMetrics() takes ≤ ${(row.target * 100).toFixed(0)}% of decisions/s`,
      measured:
        `${(row.overhead * 100).toFixed(1)}% (rounds ${row.roundOverheads.map((o) => `${(o * 100).toFixed(1)}%`).join(', ')})` +
        (row.cpuOverhead === undefined
          ? ''
          : `; per CPU-second ${(row.cpuOverhead * 100).toFixed(1)}% (rounds ${(row.cpuRoundOverheads ?? []).map((o) => `${(o * 100).toFixed(1)}%`).join(', ')})`),
      met: row.met,
    })),
  render: (rows) =>
    rows.length === 0
      ? []
      : [
          '## What metrics cost',
          '',
          "sluice fixedWindow with no recorder and with `prometheusMetrics()` (a registry of its own per run), 200 in flight over 10,000 identifiers built per call, in interleaved rounds (the memory store in a process of its own per run); the overhead is the median of the rounds' 1 − on/off. Per CPU-second: the same from the CPU time the measuring process spent per decision (on Redis, the client's alone), which other work on a shared machine moves less than decisions/s.",
          '',
          table(
            [
              'store',
              'decisions/s, metrics off',
              'with prometheusMetrics()',
              'overhead',
              'overhead per CPU-second',
            ],
            rows.map((row) => [
              row.store,
              count(row.offPerSecond),
              count(row.onPerSecond),
              `${(row.overhead * 100).toFixed(1)}%`,
              row.cpuOverhead === undefined ? '–' : `${(row.cpuOverhead * 100).toFixed(1)}%`,
            ]),
          ),
          '',
        ],
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
