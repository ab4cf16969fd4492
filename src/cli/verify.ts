// `sluice verify`: a concurrency check on the operator's own server, for every algorithm,
// beside two naive limiters that show the race the scripts prevent.
import { randomBytes } from 'node:crypto';
import { RedisStore, SLIDING_LOG_MAX_LIMIT } from '../index.js';
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
import { formatNumber, table } from './output.js';
import { type Connection, connect, redisUrl } from './redis.js';
import { Workers } from './verify-pool.js';
import { type RoundKind, type ToWorker, VERIFY_IDENTIFIER } from './verify-worker.js';

interface Round {
  readonly label: string;
  readonly kind: RoundKind;
  readonly name: string;
  readonly policy?: Record<string, unknown>;
}

export interface RoundResult {
  readonly limiter: string;
  readonly kind: 'sluice' | 'naive';
  readonly requests: number;
  readonly allowed: number;
  readonly denied: number;
  readonly errors: number;
  readonly exact: boolean;
  readonly overBy: number;
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

async function run(context: Context): Promise<number> {
  const { values, signal } = context;
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
  const url = redisUrl(stringFlag(values, 'redis'));
  const connection = await connect(url, timeoutMs);
  const prefix = `sluice-verify-${randomBytes(4).toString('hex')}`;
  const store = new RedisStore({ client: connection.client, prefix });
  const time = (await connection.client.call('TIME')) as [string, string];
  const windowMs = chooseWindowMs(Number(time[0]) * 1000);
  const plan = rounds(limit, windowMs);
  const keys = plan.map((round) => store.keyFor(round.name, VERIFY_IDENTIFIER));
  const results: RoundResult[] = [];
  let workers: Workers | undefined;
  try {
    workers = new Workers(processes);
    workers.send({ type: 'init', url, timeoutMs });
    await workers.collect('connected', signal);
    for (const [i, round] of plan.entries()) {
      const prepare: ToWorker = {
        type: 'prepare',
        kind: round.kind,
        prefix,
        name: round.name,
        key: keys[i] as string,
        parallel,
        limit,
        ttlMs: windowMs,
        ...(round.policy === undefined ? {} : { policy: round.policy }),
      };
      workers.send(prepare);
      await workers.collect('ready', signal);
      // Every process holds its requests until all are ready, so they race.
      workers.send({ type: 'go' });
      const done = await workers.collect('done', signal);
      const allowed = done.reduce((sum, d) => sum + d.allowed, 0);
      const denied = done.reduce((sum, d) => sum + d.denied, 0);
      const errors = done.reduce((sum, d) => sum + d.errors, 0);
      const firstError = done.find((d) => d.error !== undefined)?.error;
      if (round.kind === 'sluice' && firstError !== undefined) {
        context.err(`verify: ${round.label}: ${errors} requests failed: ${firstError}`);
      }
      const result: RoundResult = {
        limiter: round.label,
        kind: round.kind === 'sluice' ? 'sluice' : 'naive',
        requests,
        allowed,
        denied,
        errors,
        exact: allowed === limit && errors === 0,
        overBy: Math.max(0, allowed - limit),
      };
      results.push(result);
      context.err(`verify: ${round.label}: ${allowed} of ${requests} allowed`);
    }
  } catch (error) {
    if (signal.aborted) return EXIT.INTERRUPTED;
    throw error;
  } finally {
    await workers?.stop();
    await cleanUp(connection, keys, context);
    await connection.close();
  }
  const sluiceExact = results.filter((r) => r.kind === 'sluice').every((r) => r.exact);
  if (context.json) {
    context.out(
      JSON.stringify(
        {
          server: connection.server,
          redis: connection.label,
          processes,
          parallel,
          limit,
          requests,
          windowMs,
          exact: sluiceExact,
          results,
        },
        null,
        2,
      ),
    );
  } else {
    context.out(report(connection, { processes, parallel, limit, requests }, results, sluiceExact));
  }
  return sluiceExact ? EXIT.OK : EXIT.FOUND;
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

function report(
  connection: Connection,
  load: { processes: number; parallel: number; limit: number; requests: number },
  results: readonly RoundResult[],
  exact: boolean,
): string {
  const rows = [['limiter', 'requests', 'allowed', 'denied', 'errors', 'result']];
  for (const r of results) {
    let verdict: string;
    if (r.kind === 'sluice')
      verdict = r.exact
        ? 'exact'
        : r.allowed > load.limit
          ? `NOT EXACT: ${r.overBy} too many`
          : `NOT EXACT: ${load.limit - r.allowed} too few`;
    else
      verdict = r.overBy > 0 ? `over-admitted ${r.overBy}: the race` : 'no race this time (raise --parallel)';
    rows.push([
      r.limiter,
      formatNumber(r.requests),
      formatNumber(r.allowed),
      formatNumber(r.denied),
      formatNumber(r.errors),
      verdict,
    ]);
  }
  const naiveOver = Math.max(0, ...results.filter((r) => r.kind === 'naive').map((r) => r.overBy));
  return [
    `${load.processes} processes x ${load.parallel} parallel requests = ${formatNumber(load.requests)} at a limit of ${formatNumber(load.limit)}, on ${connection.server} at ${connection.label}`,
    '',
    table(rows),
    '',
    exact
      ? `Every sluice algorithm allowed exactly ${formatNumber(load.limit)}.${naiveOver > 0 ? ` The naive limiters let up to ${formatNumber(naiveOver)} more through.` : ''}`
      : 'A sluice algorithm was not exact on this server: please report it with this output.',
  ].join('\n');
}

/** `sluice verify`. */
export const verify: Command = { ...spec, run };
