// What `sluice verify` prints: a table of the rounds and a verdict, or one JSON document with --json.
import type { Context } from './command.js';
import { formatNumber, table } from './output.js';
import type { Connection } from './redis.js';

/** One round: how many of its requests each outcome had, and whether sluice allowed exactly the limit. */
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

/** The load every round fires: `requests` is processes x parallel, more than `limit`. */
export interface Load {
  readonly processes: number;
  readonly parallel: number;
  readonly limit: number;
  readonly requests: number;
}

/** Writes the run's results to stdout, as a table or as JSON. */
export function render(
  context: Context,
  connection: Connection,
  load: Load,
  windowMs: number,
  results: readonly RoundResult[],
  exact: boolean,
): void {
  if (!context.json) {
    context.out(report(connection, load, results, exact));
    return;
  }
  const { processes, parallel, limit, requests } = load;
  const document = {
    server: connection.server,
    redis: connection.label,
    processes,
    parallel,
    limit,
    requests,
  };
  context.out(JSON.stringify({ ...document, windowMs, exact, results }, null, 2));
}

function report(connection: Connection, load: Load, results: readonly RoundResult[], exact: boolean): string {
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
