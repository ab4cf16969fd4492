// `sluice bench`: a short run against the operator's server: throughput, latency, and Redis-side cost per decision.
import { randomBytes } from 'node:crypto';
import { createLimiter, type Limiter, RedisStore } from 'sluice';
import {
  COMMON_FLAGS,
  COMMON_FLAGS_HELP,
  CONFIG_FLAGS,
  CONFIG_FLAGS_HELP,
  CONNECTION_FLAGS,
  CONNECTION_FLAGS_HELP,
  optional,
  parseDuration,
  parsePositiveInteger,
  stringFlag,
  type Values,
} from './args.js';
import {
  deleteRunKeys,
  isScriptCallOn,
  type SlowEntry,
  scriptStats,
  slowlog,
  slowlogThresholdUs,
} from './bench-redis.js';
import {
  type BenchReport,
  type BenchResult,
  benchJsonReport,
  benchTextReport,
  type SlowCall,
  type SlowReport,
} from './bench-report.js';
import type { Command, Context } from './command.js';
import { findConfig, policyFromSpec } from './config.js';
import { EXIT } from './errors.js';
import { type Connection, connect, redisUrl } from './redis.js';

/** The policies benchmarked: 100 per minute in each algorithm's terms. */
const POLICIES: ReadonlyArray<Record<string, unknown>> = [
  { algorithm: 'fixedWindow', limit: 100, windowMs: 60_000 },
  { algorithm: 'slidingWindow', limit: 100, windowMs: 60_000 },
  { algorithm: 'slidingLog', limit: 100, windowMs: 60_000 },
  { algorithm: 'tokenBucket', capacity: 100, refillPerSecond: 100 / 60 },
  { algorithm: 'gcra', limit: 100, periodMs: 60_000 },
];

const spec = {
  name: 'bench',
  summary: 'a short benchmark on your server: decisions/s, latency, Redis µs per decision, SLOWLOG',
  flags: {
    ...COMMON_FLAGS,
    ...CONNECTION_FLAGS,
    ...CONFIG_FLAGS,
    duration: { type: 'string' },
    concurrency: { type: 'string' },
    keys: { type: 'string' },
    strict: { type: 'boolean' },
  },
  help: `Usage: sluice bench [--redis URL] [--duration 2s] [--concurrency 50] [--keys 1000] [--strict]

For each algorithm (100 per minute), <concurrency> callers in this process ask limiter.limit() for
random identifiers among <keys> during <duration>, through one connection, as an application
would. Prints decisions per second, latency percentiles (the caller's view, including the network),
and Redis-side microseconds of script time per decision (from INFO commandstats: on a busy server
other scripts' time is included), and reports limiter script calls in SLOWLOG with their time,
those of the run and those already there (calls on keys under the config's prefix).

Keys live under a prefix unique to the run (sluice-bench-<random>) and are deleted at the end.

Options:
  --duration <time>   how long each algorithm runs (default 2s)
  --concurrency <n>   callers waiting on a decision at any moment (default 50)
  --keys <n>          identifiers the callers pick from (default 1000)
  --strict            exit 1 when a limiter script of the run reached SLOWLOG (default: report it
                      and exit 0: on a loaded machine a descheduled script logs its wait too)
${CONNECTION_FLAGS_HELP}
${CONFIG_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 done, 1 with --strict: a limiter script call of the run was in SLOWLOG, 2 could not run,
130 interrupted.`,
} as const;

interface BenchOptions {
  readonly durationMs: number;
  readonly concurrency: number;
  readonly keys: number;
  readonly strict: boolean;
  /** Where the application's limiters keep their keys: SLOWLOG entries on them are reported. */
  readonly configPrefix: string;
  readonly redis: string;
  readonly timeoutMs: number;
}

function parse(values: Values): BenchOptions {
  return {
    durationMs: optional(values, 'duration', parseDuration, 2000),
    concurrency: optional(values, 'concurrency', (f, t) => parsePositiveInteger(f, t, 10_000), 50),
    keys: optional(values, 'keys', (f, t) => parsePositiveInteger(f, t, 1_000_000), 1000),
    strict: values.strict === true,
    configPrefix: stringFlag(values, 'prefix') ?? findConfig(stringFlag(values, 'config'))?.prefix ?? 'rl',
    redis: redisUrl(stringFlag(values, 'redis')),
    timeoutMs: optional(values, 'timeout', parseDuration, 5000),
  };
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return Number((sorted[Math.max(0, index)] as number).toFixed(3));
}

async function measure(
  limiter: Limiter,
  durationMs: number,
  options: BenchOptions,
  signal: AbortSignal,
): Promise<{ latencies: Float64Array; errors: number; elapsedMs: number }> {
  let latencies = new Float64Array(65_536);
  let count = 0;
  let errors = 0;
  const started = performance.now();
  const end = started + durationMs;
  const caller = async (): Promise<void> => {
    while (!signal.aborted && performance.now() < end) {
      const identifier = `id-${Math.floor(Math.random() * options.keys)}`;
      const t0 = performance.now();
      try {
        await limiter.limit(identifier);
      } catch {
        errors++;
        continue;
      }
      if (count === latencies.length) {
        const grown = new Float64Array(latencies.length * 2);
        grown.set(latencies);
        latencies = grown;
      }
      latencies[count++] = performance.now() - t0;
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, caller));
  return { latencies: latencies.slice(0, count).sort(), errors, elapsedMs: performance.now() - started };
}

/** One algorithm: a short warm-up, then the measured run with the script statistics around it. */
async function benchAlgorithm(
  connection: Connection,
  limiter: Limiter,
  options: BenchOptions,
  signal: AbortSignal,
): Promise<BenchResult> {
  // A short unmeasured run first: loads the script and warms the JIT, so the figures are of steady state.
  await limiter.peek('warm-up');
  await measure(limiter, Math.min(200, options.durationMs), options, signal);
  const before = await scriptStats(connection);
  const { latencies, errors, elapsedMs } = await measure(limiter, options.durationMs, options, signal);
  const after = await scriptStats(connection);
  const decisions = latencies.length;
  const calls = before === null || after === null ? null : after.calls - before.calls;
  return {
    algorithm: limiter.policy.algorithm,
    decisions,
    errors,
    decisionsPerSecond: Math.round((decisions * 1000) / elapsedMs),
    latencyMs: {
      p50: percentile(latencies, 50),
      p90: percentile(latencies, 90),
      p99: percentile(latencies, 99),
      max: percentile(latencies, 100),
    },
    redisUsPerDecision:
      before === null || after === null || decisions === 0
        ? null
        : Number(((after.usec - before.usec) / decisions).toFixed(2)),
    decisionsPerCall: calls === null || calls === 0 ? null : Number((decisions / calls).toFixed(1)),
  };
}

/** The slowest few entries, as the report lists them. */
function slowCalls(entries: SlowEntry[] | null, when: SlowCall['when'], count = 5): SlowCall[] {
  return [...(entries ?? [])]
    .sort((a, b) => b[2] - a[2])
    .slice(0, count)
    .map((entry) => ({
      id: entry[0],
      durationUs: entry[2],
      when,
      command: entry[3].slice(0, 4).map(String).join(' '),
    }));
}

async function execute(
  connection: Connection,
  options: BenchOptions,
  context: Context,
): Promise<BenchReport> {
  const { signal } = context;
  const prefix = `sluice-bench-${randomBytes(4).toString('hex')}`;
  const store = new RedisStore({ client: connection.client, prefix });
  const results: BenchResult[] = [];
  const used: string[] = [];
  let slow: SlowReport;
  try {
    const thresholdUs = await slowlogThresholdUs(connection);
    const before = await slowlog(connection, 128);
    for (const policySpec of POLICIES) {
      if (signal.aborted) break;
      const policy = policyFromSpec('bench policy', policySpec);
      // The bench measures Redis: a slow reply is a figure, not a timeout to be decided by policy.
      const limiter = createLimiter({
        store,
        policy,
        name: policy.algorithm,
        timeoutMs: 60_000,
        onStoreError: 'deny',
      });
      used.push(policy.algorithm);
      context.err(`bench: ${policy.algorithm} for ${options.durationMs} ms...`);
      const result = await benchAlgorithm(connection, limiter, options, signal);
      results.push(result);
      if (result.errors > 0) context.err(`bench: ${policy.algorithm}: ${result.errors} decisions failed`);
    }
    const after = await slowlog(connection, 128);
    const seen = new Set(before?.map((entry) => `${entry[0]}:${entry[1]}`) ?? []);
    const during =
      after?.filter((entry) => !seen.has(`${entry[0]}:${entry[1]}`) && isScriptCallOn(entry, prefix)) ?? null;
    const existing = before?.filter((entry) => isScriptCallOn(entry, options.configPrefix)) ?? null;
    slow = {
      thresholdUs,
      duringRun: during?.length ?? null,
      alreadyLogged: existing?.length ?? null,
      entries: [...slowCalls(during, 'during the run'), ...slowCalls(existing, 'already logged')],
    };
  } finally {
    await deleteRunKeys(connection, store, used, options.keys, context.err);
  }
  return {
    server: connection.server,
    redis: connection.label,
    durationMs: options.durationMs,
    concurrency: options.concurrency,
    keys: options.keys,
    results,
    slowlog: slow,
  };
}

async function run(context: Context): Promise<number> {
  const options = parse(context.values);
  const connection = await connect(options.redis, options.timeoutMs);
  let report: BenchReport;
  try {
    report = await execute(connection, options, context);
  } finally {
    await connection.close();
  }
  if (context.signal.aborted) return EXIT.INTERRUPTED;
  context.out(
    context.json ? benchJsonReport(report) : benchTextReport(report, options.configPrefix, options.strict),
  );
  return options.strict && (report.slowlog.duringRun ?? 0) > 0 ? EXIT.FOUND : EXIT.OK;
}

/** `sluice bench`. */
export const bench: Command = { ...spec, run };
