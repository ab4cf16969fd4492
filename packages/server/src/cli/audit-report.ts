// What `sluice audit` finds, and its reports: JSON, or text with a table per limiter, then the keys by problem.
import type { Policy } from 'sluice';
import { maxTtlMs, NO_CONFIG, stateType } from './config.js';
import { formatDuration, formatNumber, table } from './output.js';

export type Problem = 'no-expiry' | 'ttl-too-long' | 'unexpected-type';

export interface Finding {
  readonly key: string;
  readonly limiter: string;
  /** The primary holding the key, `host:port`. */
  readonly primary: string;
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

export interface AuditGroup {
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

/** Everything a report shows: the walk's result and what was asked. */
export interface AuditReport {
  readonly connection: { readonly server: string; readonly label: string; readonly cluster: boolean };
  readonly match: string;
  readonly prefix: string;
  /** The user's config file, or undefined when there is none (TTLs were then not judged). */
  readonly configPath: string | undefined;
  readonly scanned: number;
  readonly elapsedMs: number;
  readonly ended: 'complete' | 'interrupted' | 'max-keys';
  readonly maxKeys: number;
  readonly groups: readonly AuditGroup[];
  readonly findings: readonly Finding[];
  readonly fix: boolean;
  readonly show: number;
}

/** Said when there is no config: what was left unjudged, and how to have it judged. */
export const UNJUDGED_NOTE = `TTLs were not judged against policies: ${NO_CONFIG}, and a policy sluice would guess could be wrong for your keys. Only keys without an expiry and keys of a type no limiter writes are reported. Pass --config <file> with your application's policies to check TTLs too.`;

function fixedCount(report: AuditReport): number {
  return report.groups.reduce((sum, group) => sum + group.fixed, 0);
}

/** The `--json` document. */
export function auditJsonReport(report: AuditReport): string {
  const { connection, groups, findings } = report;
  return JSON.stringify(
    {
      server: connection.server,
      redis: connection.label,
      match: report.match,
      prefix: report.prefix,
      config: report.configPath ?? null,
      ttlsJudged: report.configPath !== undefined,
      complete: report.ended === 'complete',
      ended: report.ended,
      scanned: report.scanned,
      elapsedMs: report.elapsedMs,
      found: findings.length,
      fixed: fixedCount(report),
      limiters: groups.map((group) => ({
        name: group.name,
        policy: group.policy?.description ?? null,
        expectedType: group.policy === undefined ? null : stateType(group.policy),
        maxTtlMs: group.policy === undefined ? null : maxTtlMs(group.policy),
        keys: group.keys,
        noExpiry: group.noExpiry,
        ttlTooLong: group.ttlTooLong,
        unexpectedType: group.unexpectedType,
        fixed: group.fixed,
      })),
      findings,
      ...(report.configPath === undefined ? { note: UNJUDGED_NOTE } : {}),
    },
    null,
    2,
  );
}

function headline(report: AuditReport): string {
  const { connection, scanned, elapsedMs } = report;
  const verb =
    report.ended === 'complete'
      ? 'Scanned'
      : report.ended === 'interrupted'
        ? 'Interrupted after'
        : `Stopped at --max-keys ${formatNumber(report.maxKeys)} after`;
  return `${verb} ${formatNumber(scanned)} keys matching ${report.match} on ${connection.server} at ${connection.label} in ${formatDuration(elapsedMs)} (${formatNumber(perSecond(scanned, elapsedMs))} keys/s).`;
}

function summaryTable(report: AuditReport): string {
  const rows = [['limiter', 'policy', 'keys', 'no expiry', 'TTL too long', 'wrong type', 'fixed']];
  const unknown = report.configPath === undefined ? '(no config)' : '(not in config)';
  for (const group of report.groups) {
    rows.push([
      group.name,
      group.policy?.description ?? unknown,
      formatNumber(group.keys),
      formatNumber(group.noExpiry),
      group.policy === undefined ? '-' : formatNumber(group.ttlTooLong),
      group.name === OTHER ? '-' : formatNumber(group.unexpectedType),
      formatNumber(group.fixed),
    ]);
  }
  return table(rows);
}

/** The keys of one limiter, by problem, with a note where more were found than shown. */
function groupListing(group: AuditGroup, report: AuditReport): string[] {
  const counts: Record<Problem, number> = {
    'no-expiry': group.noExpiry,
    'unexpected-type': group.unexpectedType,
    'ttl-too-long': group.ttlTooLong,
  };
  const rows: string[][] = [];
  const notes: string[] = [];
  for (const problem of PROBLEMS) {
    const shown = group.shown[problem];
    for (const finding of shown) {
      rows.push([
        `  ${finding.key}`,
        // On a cluster, which primary to look at.
        ...(report.connection.cluster ? [`on ${finding.primary}`] : []),
        finding.type,
        finding.ttlMs === -1 ? 'no TTL' : `TTL ${formatDuration(finding.ttlMs)}`,
        finding.problems.map((p) => problemText(p, finding)).join(', '),
        finding.fixedTtlMs === undefined ? '' : `-> fixed: TTL ${formatDuration(finding.fixedTtlMs)}`,
      ]);
    }
    // A key with several problems is listed once but counted under each.
    const more = counts[problem] - shown.length;
    if (shown.length === report.show && more > 0) {
      notes.push(
        `  ... and up to ${formatNumber(more)} more with ${problemText(problem, shown[0] as Finding)} (--show sets how many, --json lists every key)`,
      );
    }
  }
  return [`${group.name}:`, table(rows), ...notes];
}

/** What to do next, from what was found and done. */
function advice(report: AuditReport): string[] {
  const { findings } = report;
  const lines = [
    `Found ${formatNumber(findings.length)} key${findings.length === 1 ? '' : 's'} needing attention.`,
  ];
  if (report.fix) {
    lines.push(
      `Fixed ${formatNumber(fixedCount(report))}: keys without an expiry got one, TTLs beyond their policy were cut.`,
    );
  } else if (
    findings.some((finding) => !finding.problems.every((problem) => problem === 'unexpected-type'))
  ) {
    lines.push(
      report.configPath === undefined
        ? 'Run again with --config <file> --fix --ttl <time> to give them an expiry within their policy.'
        : 'Run again with --fix --ttl <time> to give them an expiry within their policy.',
    );
  }
  if (findings.some((finding) => finding.problems.includes('unexpected-type'))) {
    lines.push(
      "Keys of an unexpected type are not a limiter's: look at them (sluice inspect, redis-cli) and delete or rename them.",
    );
  }
  return lines;
}

/** The text report. */
export function auditTextReport(report: AuditReport): string {
  const lines: string[] = [headline(report)];
  if (report.groups.length > 0) lines.push('', summaryTable(report));
  if (report.configPath === undefined) lines.push('', UNJUDGED_NOTE);
  if (report.findings.length === 0) {
    lines.push(
      '',
      report.configPath === undefined
        ? 'Nothing found: every key has an expiry and a type a limiter writes.'
        : 'Nothing found: every key has an expiry within its policy and the expected type.',
    );
    return lines.join('\n');
  }
  for (const group of report.groups) {
    if (PROBLEMS.every((problem) => group.shown[problem].length === 0)) continue;
    lines.push('', ...groupListing(group, report));
  }
  lines.push('', ...advice(report));
  return lines.join('\n');
}
