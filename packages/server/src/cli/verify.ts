// `sluice verify`: a concurrency check on the operator's own server, for every algorithm,
// beside two naive limiters that show the race the scripts prevent.
import { randomBytes } from 'node:crypto';
import { RedisStore, SLIDING_LOG_MAX_LIMIT } from 'sluice';
import {
  COMMON_FLAGS,
  COMMON_FLAGS_HELP,
  CONNECTION_FLAGS,
  CONNECTION_FLAGS_HELP,
  optional,
  parseDuration,
  parsePositiveInteger,
  stringFlag,
} from './args.js';
import type { Command, Context } from './command.js';
import { CliError, EXIT, errorText } from './errors.js';
import { type Connection, connect, redisUrl } from './redis.js';
import { Workers } from './verify-pool.js';
import { type Load, type RoundResult, render } from './verify-report.js';
import { type RoundKind, type ToWorker, VERIFY_IDENTIFIER } from './verify-worker.js';

interface Round {
  readonly label: string;
  readonly kind: RoundKind;
  readonly name: string;
  readonly policy?: Record<string, unknown>;
}

const HOUR_MS = 3_600_000;
/** Time left in the current window that the run must fit in, with room to spare. */
const MARGIN_MS = 10 * 60_000;

/**
 * A window of about a day in which `nowMs` is not near the end: clock-aligned windows (fixed and
 * sliding) must not roll over mid-run, or a correct limiter would rightly allow more.
 */
export function chooseWindowMs(nowMs: number): number {
  for (let hours = 24; ; hours++) {
    const windowMs = hours * HOUR_MS;
    if (windowMs - (nowMs % windowMs) > MARGIN_MS) return windowMs;
  }
}

function rounds(limit: number, windowMs: number): Round[] {
  return [
    {
      label: 'fixedWindow',
      kind: 'sluice',
      name: 'fixedWindow',
      policy: { algorithm: 'fixedWindow', limit, windowMs },
    },
    {
      label: 'slidingWindow',
      kind: 'sluice',
      name: 'slidingWindow',
      policy: { algorithm: 'slidingWindow', limit, windowMs },
    },
    {
      label: 'slidingLog',
      kind: 'sluice',
      name: 'slidingLog',
      policy: { algorithm: 'slidingLog', limit, windowMs },
    },
    {
      label: 'tokenBucket',
      kind: 'sluice',
      name: 'tokenBucket',
      // One token a window's share: none refills during the run.
      policy: { algorithm: 'tokenBucket', capacity: limit, refillPerSecond: (limit * 1000) / windowMs },
    },
    { label: 'gcra', kind: 'sluice', name: 'gcra', policy: { algorithm: 'gcra', limit, periodMs: windowMs } },
    { label: 'naive GET then INCR', kind: 'get-incr', name: 'naive-get-incr' },
    { label: 'MULTI/EXEC without WATCH', kind: 'multi-exec', name: 'naive-multi-exec' },
  ];
}

const spec = {
  name: 'verify',
  summary: 'prove every algorithm exact under concurrency on your server, beside two naive limiters',
  flags: {
    ...COMMON_FLAGS,
    ...CONNECTION_FLAGS,
    processes: { type: 'string' },
    parallel: { type: 'string' },
    limit: { type: 'string' },
  },
  help: `Usage: sluice verify [--redis URL] [--processes 5] [--parallel 100] [--limit 100]

A concurrency check, on your own server: for every algorithm, <processes> processes
each fire <parallel> requests at once at one key with a limit of <limit>, and the allowed
requests are counted. A correct limiter allows exactly <limit>. Beside them, the same load on a
naive GET-then-INCR limiter and on a MULTI/EXEC-without-WATCH limiter shows the race the
scripts prevent (with --parallel above --limit, one process alone shows it).

Keys live under a prefix unique to the run (sluice-verify-<random>), expire within a day, and are
deleted at the end, also after Ctrl-C.

Options:
  --processes <n>     processes, each with its own connection (default 5)
  --parallel <n>      requests each process fires at once (default 100)
  --limit <n>         the limit of every limiter (default 100, at most ${SLIDING_LOG_MAX_LIMIT}, the sliding log's ceiling)
${CONNECTION_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 every sluice algorithm exact, 1 one was not, 2 could not run, 130 interrupted.`,
} as const;

interface Options extends Load {
  readonly url: string;
  readonly timeoutMs: number;
}

/** What the rounds of one run share: where their keys live and the window they must fit in. */
interface Plan {
  readonly prefix: string;
  readonly windowMs: number;
  readonly rounds: readonly Round[];
  /** Each round's one key, in the order of `rounds`. */
  readonly keys: readonly string[];
}

async function run(context: Context): Promise<number> {
  const options = parse(context.values);
  const connection = await connect(options.url, options.timeoutMs);
  const plan = await planRun(connection, options.limit);
  let results: RoundResult[];
  try {
    results = await playRounds(context, options, plan);
  } catch (error) {
    if (context.signal.aborted) return EXIT.INTERRUPTED;
    throw error;
  } finally {
    await cleanUp(connection, plan.keys, context);
    await connection.close();
  }
  const exact = results.filter((r) => r.kind === 'sluice').every((r) => r.exact);
  render(context, connection, options, plan.windowMs, results, exact);
  return exact ? EXIT.OK : EXIT.FOUND;
}

function parse(values: Context['values']): Options {
  const processes = optional(values, 'processes', (f, t) => parsePositiveInteger(f, t, 64), 5);
  const parallel = optional(values, 'parallel', (f, t) => parsePositiveInteger(f, t, 10_000), 100);
  // The sliding log's ceiling bounds every round: one limit for all, so the rows compare.
  const limit = optional(values, 'limit', (f, t) => parsePositiveInteger(f, t, SLIDING_LOG_MAX_LIMIT), 100);
  const timeoutMs = optional(values, 'timeout', parseDuration, 5000);
  const requests = processes * parallel;
  if (requests <= limit) {
    throw new CliError(
      `${processes} processes x ${parallel} parallel = ${requests} requests cannot exceed a limit of ${limit}: raise --processes or --parallel, or lower --limit.`,
    );
  }
  return { processes, parallel, limit, requests, timeoutMs, url: redisUrl(stringFlag(values, 'redis')) };
}

/** The rounds, under a prefix unique to the run, in a window read from the server's clock. */
async function planRun(connection: Connection, limit: number): Promise<Plan> {
  const prefix = `sluice-verify-${randomBytes(4).toString('hex')}`;
  const store = new RedisStore({ client: connection.client, prefix });
  const time = (await connection.client.call('TIME')) as [string, string];
  const windowMs = chooseWindowMs(Number(time[0]) * 1000);
  const planned = rounds(limit, windowMs);
  const keys = planned.map((round) => store.keyFor(round.name, VERIFY_IDENTIFIER));
  return { prefix, windowMs, rounds: planned, keys };
}

async function playRounds(context: Context, options: Options, plan: Plan): Promise<RoundResult[]> {
  const workers = new Workers(options.processes);
  try {
    workers.send({ type: 'init', url: options.url, timeoutMs: options.timeoutMs });
    await workers.collect('connected', context.signal);
    const results: RoundResult[] = [];
    for (const [i, round] of plan.rounds.entries()) {
      results.push(await playRound(context, workers, options, plan, round, plan.keys[i] as string));
    }
    return results;
  } finally {
    await workers.stop();
  }
}

async function playRound(
  context: Context,
  workers: Workers,
  load: Load,
  plan: Plan,
  round: Round,
  key: string,
): Promise<RoundResult> {
  const prepare: ToWorker = {
    type: 'prepare',
    kind: round.kind,
    prefix: plan.prefix,
    name: round.name,
    key,
    parallel: load.parallel,
    limit: load.limit,
    ttlMs: plan.windowMs,
    ...(round.policy === undefined ? {} : { policy: round.policy }),
  };
  workers.send(prepare);
  await workers.collect('ready', context.signal);
  // Every process holds its requests until all are ready, so they race.
  workers.send({ type: 'go' });
  const done = await workers.collect('done', context.signal);
  const allowed = done.reduce((sum, d) => sum + d.allowed, 0);
  const denied = done.reduce((sum, d) => sum + d.denied, 0);
  const errors = done.reduce((sum, d) => sum + d.errors, 0);
  const firstError = done.find((d) => d.error !== undefined)?.error;
  if (round.kind === 'sluice' && firstError !== undefined) {
    context.err(`verify: ${round.label}: ${errors} requests failed: ${firstError}`);
  }
  context.err(`verify: ${round.label}: ${allowed} of ${load.requests} allowed`);
  return {
    limiter: round.label,
    kind: round.kind === 'sluice' ? 'sluice' : 'naive',
    requests: load.requests,
    allowed,
    denied,
    errors,
    exact: allowed === load.limit && errors === 0,
    overBy: Math.max(0, allowed - load.limit),
  };
}

async function cleanUp(connection: Connection, keys: readonly string[], context: Context): Promise<void> {
  try {
    // One DEL per key: on a cluster the keys live in different slots.
    await Promise.all(keys.map((key) => connection.client.del(key)));
  } catch (error) {
    context.err(
      `verify: could not delete its keys (${errorText(error)}); they expire within a day: ${keys.join(' ')}`,
    );
  }
}

/** `sluice verify`. */
export const verify: Command = { ...spec, run };
