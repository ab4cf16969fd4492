// `sluice bench`: a short run against the operator's server: throughput, latency, and Redis-side cost per decision.
import { randomBytes } from 'node:crypto';
import { createLimiter, type Limiter, RedisStore } from '../index.js';
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
} from './args.js';
import type { Command, Context } from './command.js';
import { loadConfig, policyFromSpec } from './config.js';
import { EXIT, errorText } from './errors.js';
import { formatNumber, table } from './output.js';
import { type Connection, connect, onEveryPrimary, redisUrl } from './redis.js';

const SCRIPT_COMMANDS = ['evalsha', 'eval', 'fcall'];

/** The policies benchmarked: 100 per minute in each algorithm's terms. */
const POLICIES: ReadonlyArray<Record<string, unknown>> = [
  { algorithm: 'fixedWindow', limit: 100, windowMs: 60_000 },
  { algorithm: 'slidingWindow', limit: 100, windowMs: 60_000 },
  { algorithm: 'slidingLog', limit: 100, windowMs: 60_000 },
  { algorithm: 'tokenBucket', capacity: 100, refillPerSecond: 100 / 60 },
  { algorithm: 'gcra', limit: 100, periodMs: 60_000 },
];

export interface BenchResult {
  readonly algorithm: string;
  readonly decisions: number;
  readonly errors: number;
  readonly decisionsPerSecond: number;
  readonly latencyMs: {
    readonly p50: number;
    readonly p90: number;
    readonly p99: number;
    readonly max: number;
  };
  /** Script time Redis reports (INFO commandstats), per decision; null when INFO is not allowed. */
  readonly redisUsPerDecision: number | null;
  /** Decisions per script call: the store coalesces the decisions of one tick. */
  readonly decisionsPerCall: number | null;
}

interface ScriptStats {
  readonly calls: number;
  readonly usec: number;
}

/** Sums calls and microseconds of the script commands over every primary. */
async function scriptStats(connection: Connection): Promise<ScriptStats | null> {
  try {
    const infos = await onEveryPrimary(connection, 'INFO', 'commandstats');
    let calls = 0;
    let usec = 0;
    for (const info of infos) {
      for (const command of SCRIPT_COMMANDS) {
        const match = new RegExp(`^cmdstat_${command}:calls=(\\d+),usec=(\\d+)`, 'm').exec(String(info));
        if (match !== null) {
          calls += Number(match[1]);
          usec += Number(match[2]);
        }
      }
    }
    return { calls, usec };
  } catch {
    return null;
  }
}

type SlowEntry = [number, number, number, string[], ...unknown[]];

async function slowlog(connection: Connection, count: number): Promise<SlowEntry[] | null> {
  try {
    const replies = await onEveryPrimary(connection, 'SLOWLOG', 'GET', count);
    return replies.flatMap((reply) => reply as SlowEntry[]);
  } catch {
    return null;
  }
}

function isScriptCallOn(entry: SlowEntry, prefix: string): boolean {
  const args = entry[3].map(String);
  return (
    SCRIPT_COMMANDS.includes((args[0] ?? '').toLowerCase()) &&
    args.some((arg) => arg.startsWith(`${prefix}:`))
  );
}

function slowest(entries: SlowEntry[] | null, count = 5): SlowEntry[] {
  return [...(entries ?? [])].sort((a, b) => b[2] - a[2]).slice(0, count);
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return Number((sorted[Math.max(0, index)] as number).toFixed(3));
}

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
  },
  help: `Usage: sluice bench [--redis URL] [--duration 2s] [--concurrency 50] [--keys 1000]

For each algorithm (100 per minute), <concurrency> callers in this process ask limiter.limit() for
random identifiers among <keys> during <duration>, through one connection, as an application
would. Prints decisions per second, latency percentiles (the caller's view, including the network),
and Redis-side microseconds of script time per decision (from INFO commandstats: on a busy server
other scripts' time is included), and checks SLOWLOG for limiter script calls, during the run and
already there (calls on keys under the config's prefix).

Keys live under a prefix unique to the run (sluice-bench-<random>) and are deleted at the end.

Options:
  --duration <time>   how long each algorithm runs (default 2s)
  --concurrency <n>   callers waiting on a decision at any moment (default 50)
  --keys <n>          identifiers the callers pick from (default 1000)
${CONNECTION_FLAGS_HELP}
${CONFIG_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 done, 1 a limiter script call was in SLOWLOG during the run, 2 could not run, 130 interrupted.`,
} as const;

async function measure(
  limiter: Limiter,
  durationMs: number,
  concurrency: number,
  keys: number,
  signal: AbortSignal,
): Promise<{ latencies: Float64Array; errors: number; elapsedMs: number }> {
  let latencies = new Float64Array(65_536);
  let count = 0;
  let errors = 0;
  const started = performance.now();
  const end = started + durationMs;
  const caller = async (): Promise<void> => {
    while (!signal.aborted && performance.now() < end) {
      const identifier = `id-${Math.floor(Math.random() * keys)}`;
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
  await Promise.all(Array.from({ length: concurrency }, caller));
  return { latencies: latencies.slice(0, count).sort(), errors, elapsedMs: performance.now() - started };
}

async function run(context: Context): Promise<number> {
  const { values, signal } = context;
  const durationMs = optional(values, 'duration', parseDuration, 2000);
  const concurrency = optional(values, 'concurrency', (f, t) => parsePositiveInteger(f, t, 10_000), 50);
  const keys = optional(values, 'keys', (f, t) => parsePositiveInteger(f, t, 1_000_000), 1000);
  const timeoutMs = optional(values, 'timeout', parseDuration, 5000);
  const config = loadConfig(stringFlag(values, 'config'));
  const configPrefix = stringFlag(values, 'prefix') ?? config.prefix;
  const connection = await connect(redisUrl(stringFlag(values, 'redis')), timeoutMs);
  const prefix = `sluice-bench-${randomBytes(4).toString('hex')}`;
  const store = new RedisStore({ client: connection.client, prefix });
  const results: BenchResult[] = [];
  const used: string[] = [];
  let slowDuring: SlowEntry[] | null = null;
  let slowBefore: SlowEntry[] | null = null;
  let thresholdUs: number | null = null;
  try {
    try {
      const reply = (await connection.primaries[0]?.call(
        'CONFIG',
        'GET',
        'slowlog-log-slower-than',
      )) as string[];
      thresholdUs = reply[1] === undefined ? null : Number(reply[1]);
    } catch {
      thresholdUs = null;
    }
    slowBefore = await slowlog(connection, 128);
    for (const spec of POLICIES) {
      if (signal.aborted) break;
      const policy = policyFromSpec('bench policy', spec);
      // The bench measures Redis: a slow reply is a figure, not a timeout to be decided by policy.
      const limiter = createLimiter({
        store,
        policy,
        name: policy.algorithm,
        timeoutMs: 60_000,
        onStoreError: 'deny',
      });
      used.push(policy.algorithm);
      context.err(`bench: ${policy.algorithm} for ${durationMs} ms...`);
      // A short unmeasured run first: loads the script and warms the JIT, so the figures are of steady state.
      await limiter.peek('warm-up');
      await measure(limiter, Math.min(200, durationMs), concurrency, keys, signal);
      const before = await scriptStats(connection);
      const { latencies, errors, elapsedMs } = await measure(limiter, durationMs, concurrency, keys, signal);
      const after = await scriptStats(connection);
      const decisions = latencies.length;
      const calls = before === null || after === null ? null : after.calls - before.calls;
      results.push({
        algorithm: policy.algorithm,
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
      });
      if (errors > 0) context.err(`bench: ${policy.algorithm}: ${errors} decisions failed`);
    }
    const after = await slowlog(connection, 128);
    const seen = new Set(slowBefore?.map((entry) => `${entry[0]}:${entry[1]}`) ?? []);
    slowDuring =
      after === null
        ? null
        : after.filter((entry) => !seen.has(`${entry[0]}:${entry[1]}`) && isScriptCallOn(entry, prefix));
  } finally {
    await cleanUp(connection, store, used, keys, context);
    await connection.close();
  }
  if (signal.aborted) return EXIT.INTERRUPTED;
  const slowExisting = slowBefore?.filter((entry) => isScriptCallOn(entry, configPrefix)) ?? null;
  const slow = {
    thresholdUs,
    duringRun: slowDuring?.length ?? null,
    alreadyLogged: slowExisting?.length ?? null,
    // A few of each, the slowest first: enough to recognise the calls without flooding the report.
    entries: [...slowest(slowExisting), ...slowest(slowDuring)].map((entry) => ({
      id: entry[0],
      durationUs: entry[2],
      command: entry[3].slice(0, 4).map(String).join(' '),
    })),
  };
  if (context.json) {
    context.out(
      JSON.stringify(
        {
          server: connection.server,
          redis: connection.label,
          durationMs,
          concurrency,
          keys,
          results,
          slowlog: slow,
        },
        null,
        2,
      ),
    );
  } else {
    const rows = [
      [
        'algorithm',
        'decisions',
        'decisions/s',
        'p50 ms',
        'p90 ms',
        'p99 ms',
        'max ms',
        'Redis µs/decision',
        'decisions/call',
      ],
    ];
    for (const r of results) {
      rows.push([
        r.algorithm,
        formatNumber(r.decisions),
        formatNumber(r.decisionsPerSecond),
        r.latencyMs.p50.toFixed(2),
        r.latencyMs.p90.toFixed(2),
        r.latencyMs.p99.toFixed(2),
        r.latencyMs.max.toFixed(2),
        r.redisUsPerDecision === null ? 'n/a' : r.redisUsPerDecision.toFixed(2),
        r.decisionsPerCall === null ? 'n/a' : r.decisionsPerCall.toFixed(1),
      ]);
    }
    const threshold = thresholdUs === null ? 'the configured threshold' : `${formatNumber(thresholdUs)} µs`;
    const slowText =
      slowDuring === null
        ? 'SLOWLOG could not be read (the command may be disabled on this server).'
        : `SLOWLOG (calls slower than ${threshold}): ${slowDuring.length === 0 ? 'no' : slowDuring.length} limiter script calls during the run; ${slowExisting?.length ?? 0} on ${configPrefix}:* keys already in the log.`;
    context.out(
      [
        `${formatDuration(durationMs)} per algorithm, ${concurrency} concurrent callers over ${formatNumber(keys)} identifiers, on ${connection.server} at ${connection.label}`,
        '',
        table(rows),
        '',
        slowText,
        ...slow.entries.map(
          (entry) => `  #${entry.id} ${formatNumber(entry.durationUs)} µs: ${entry.command} ...`,
        ),
      ].join('\n'),
    );
  }
  return (slowDuring?.length ?? 0) > 0 ? EXIT.FOUND : EXIT.OK;
}

function formatDuration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

async function cleanUp(
  connection: Connection,
  store: RedisStore,
  names: readonly string[],
  keys: number,
  context: Context,
): Promise<void> {
  try {
    for (const name of names) {
      for (let start = 0; start < keys; start += 500) {
        const batch: Array<Promise<unknown>> = [];
        for (let i = start; i < Math.min(keys, start + 500); i++) {
          batch.push(connection.client.unlink(store.keyFor(name, `id-${i}`)));
        }
        await Promise.all(batch);
      }
    }
  } catch (error) {
    context.err(
      `bench: could not delete its keys under ${store.prefix}: (${errorText(error)}); they expire within minutes.`,
    );
  }
}

/** `sluice bench`. */
export const bench: Command = { ...spec, run };
