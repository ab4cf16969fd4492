// What `sluice audit` finds, and its text report: a table per limiter, then the keys, listed by problem.
import type { Policy } from '../index.js';
import { formatDuration, formatNumber, table } from './output.js';

export type Problem = 'no-expiry' | 'ttl-too-long' | 'unexpected-type';

export interface Finding {
  readonly key: string;
  readonly limiter: string;
  readonly problems: Problem[];
  readonly type: string;
  /** The TTL found, -1 for none. */
  readonly ttlMs: number;
  /** What a key of this limiter should be, when known. */
  readonly expectedType: string | undefined;
  /** The longest TTL the limiter's policy sets, when known. */
  readonly maxTtlMs: number | undefined;
  /** The TTL `--fix` gave, when it did. */
  fixedTtlMs?: number;
}

export interface Group {
  readonly name: string;
  readonly policy: Policy | undefined;
  keys: number;
  noExpiry: number;
  ttlTooLong: number;
  unexpectedType: number;
  fixed: number;
  /** The first keys found of each problem, for the text report; a key is listed under its first problem. */
  readonly shown: Record<Problem, Finding[]>;
}

/** The order problems are listed in: the outage first. */
export const PROBLEMS: readonly Problem[] = ['no-expiry', 'unexpected-type', 'ttl-too-long'];

/** Keys whose name does not follow `<prefix>:<name>:{...}` are grouped under this label. */
export const OTHER = '(other keys)';

export function perSecond(count: number, elapsedMs: number): number {
  return elapsedMs <= 0 ? count : Math.round((count * 1000) / elapsedMs);
}

function problemText(problem: Problem, finding: Finding): string {
  if (problem === 'no-expiry') return 'no expiry';
  if (problem === 'unexpected-type') return `unexpected type (expected ${finding.expectedType})`;
  return `TTL far beyond its policy (at most ${formatDuration(finding.maxTtlMs ?? 0)})`;
}

export function textReport(report: {
  connection: { server: string; label: string };
  match: string;
  scanned: number;
  elapsedMs: number;
  complete: boolean;
  ordered: readonly Group[];
  findings: readonly Finding[];
  fix: boolean;
  fixed: number;
  show: number;
}): string {
  const { connection, match, scanned, elapsedMs, ordered, findings, show } = report;
  const lines: string[] = [];
  lines.push(
    `${report.complete ? 'Scanned' : 'Interrupted after'} ${formatNumber(scanned)} keys matching ${match} on ${connection.server} at ${connection.label} in ${formatDuration(elapsedMs)} (${formatNumber(perSecond(scanned, elapsedMs))} keys/s).`,
  );
  if (ordered.length > 0) {
    const rows = [['limiter', 'policy', 'keys', 'no expiry', 'TTL too long', 'wrong type', 'fixed']];
    for (const group of ordered) {
      rows.push([
        group.name,
        group.policy?.description ?? '(not in config)',
        formatNumber(group.keys),
        formatNumber(group.noExpiry),
        group.policy === undefined ? '-' : formatNumber(group.ttlTooLong),
        group.name === OTHER ? '-' : formatNumber(group.unexpectedType),
        formatNumber(group.fixed),
      ]);
    }
    lines.push('', table(rows));
  }
  if (findings.length === 0) {
    lines.push('', 'Nothing found: every key has an expiry within its policy and the expected type.');
    return lines.join('\n');
  }
  for (const group of ordered) {
    const counts: Record<Problem, number> = {
      'no-expiry': group.noExpiry,
      'unexpected-type': group.unexpectedType,
      'ttl-too-long': group.ttlTooLong,
    };
    if (PROBLEMS.every((problem) => group.shown[problem].length === 0)) continue;
    lines.push('', `${group.name}:`);
    const rows: string[][] = [];
    const notes: string[] = [];
    for (const problem of PROBLEMS) {
      const shown = group.shown[problem];
      for (const finding of shown) {
        rows.push([
          `  ${finding.key}`,
          finding.type,
          finding.ttlMs === -1 ? 'no TTL' : `TTL ${formatDuration(finding.ttlMs)}`,
          finding.problems.map((p) => problemText(p, finding)).join(', '),
          finding.fixedTtlMs === undefined ? '' : `-> fixed: TTL ${formatDuration(finding.fixedTtlMs)}`,
        ]);
      }
      // A key with several problems is listed once but counted under each.
      const more = counts[problem] - shown.length;
      if (shown.length === show && more > 0) {
        notes.push(
          `  ... and up to ${formatNumber(more)} more with ${problemText(problem, shown[0] as Finding)} (--show sets how many, --json lists every key)`,
        );
      }
    }
    lines.push(table(rows), ...notes);
  }
  lines.push('');
  lines.push(
    `Found ${formatNumber(findings.length)} key${findings.length === 1 ? '' : 's'} needing attention.`,
  );
  if (report.fix)
    lines.push(
      `Fixed ${formatNumber(report.fixed)}: keys without an expiry got one, TTLs beyond their policy were cut.`,
    );
  else if (findings.some((finding) => !finding.problems.every((problem) => problem === 'unexpected-type'))) {
    lines.push('Run again with --fix --ttl <time> to give them an expiry within their policy.');
  }
  if (findings.some((finding) => finding.problems.includes('unexpected-type'))) {
    lines.push(
      "Keys of an unexpected type are not a limiter's: look at them (sluice inspect, redis-cli) and delete or rename them.",
    );
  }
  return lines.join('\n');
}
