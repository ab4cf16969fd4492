// What `sluice bench` measured, and its reports: JSON, or a table per algorithm and the SLOWLOG findings.
import { formatNumber, table } from './output.js';

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

/** A limiter script call SLOWLOG holds: how long it blocked the server, and when it was logged. */
export interface SlowCall {
  readonly id: number;
  readonly durationUs: number;
  /** `during the run` (the bench's own), or `already logged` (your application's, before the run). */
  readonly when: 'during the run' | 'already logged';
  readonly command: string;
}

export interface SlowReport {
  readonly thresholdUs: number | null;
  /** The run's script calls in SLOWLOG; null when SLOWLOG could not be read. */
  readonly duringRun: number | null;
  /** Script calls on `<prefix>:*` keys logged before the run. */
  readonly alreadyLogged: number | null;
  /** The slowest few of each, slowest first. */
  readonly entries: readonly SlowCall[];
}

export interface BenchReport {
  readonly server: string;
  readonly redis: string;
  readonly durationMs: number;
  readonly concurrency: number;
  readonly keys: number;
  readonly results: readonly BenchResult[];
  readonly slowlog: SlowReport;
}

/** The `--json` document. */
export function benchJsonReport(report: BenchReport): string {
  return JSON.stringify(report, null, 2);
}

function runLength(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

function resultsTable(results: readonly BenchResult[]): string {
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
  return table(rows);
}

function slowlogLines(slow: SlowReport, prefix: string, strict: boolean): string[] {
  if (slow.duringRun === null) {
    return ['SLOWLOG could not be read (the command may be disabled on this server).'];
  }
  const threshold =
    slow.thresholdUs === null ? 'the configured threshold' : `${formatNumber(slow.thresholdUs)} µs`;
  const lines = [
    `SLOWLOG (calls slower than ${threshold}): ${slow.duringRun === 0 ? 'no' : slow.duringRun} limiter script calls during the run; ${slow.alreadyLogged ?? 0} on ${prefix}:* keys already in the log.`,
    ...slow.entries.map(
      (entry) => `  #${entry.id} ${formatNumber(entry.durationUs)} µs, ${entry.when}: ${entry.command} ...`,
    ),
  ];
  if (slow.duringRun > 0 && !strict) {
    lines.push(
      'A script in SLOWLOG held the server that long; on a loaded machine the time includes waits for the CPU. --strict makes this exit 1.',
    );
  }
  return lines;
}

/** The text report. */
export function benchTextReport(report: BenchReport, prefix: string, strict: boolean): string {
  return [
    `${runLength(report.durationMs)} per algorithm, ${report.concurrency} concurrent callers over ${formatNumber(report.keys)} identifiers, on ${report.server} at ${report.redis}`,
    '',
    resultsTable(report.results),
    '',
    ...slowlogLines(report.slowlog, prefix, strict),
  ].join('\n');
}
