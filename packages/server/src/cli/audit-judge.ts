// What is wrong with one key `sluice audit` found, judged by its policy, and what `--fix` sends for it.
import type { Policy, StoredKind } from 'sluice';
import { type Finding, OTHER, type Problem } from './audit-report.js';
import { maxTtlMs, stateType } from './config.js';

/**
 * A TTL counts as "far beyond" its policy above twice the longest the policy sets: the scripts never
 * set more than the longest, and the slack keeps a recent policy change from raising an alarm.
 */
export const TTL_SLACK_FACTOR = 2;

/** The limiter name in `<prefix>:<name>:{<identifier>}` (or `...:{<tag>}:<identifier>`), if the key has that shape. */
export function limiterOf(key: string, prefix: string): string | undefined {
  if (!key.startsWith(`${prefix}:`)) return undefined;
  const rest = key.slice(prefix.length + 1);
  const at = rest.indexOf(':{');
  if (at < 1) return undefined;
  const name = rest.slice(0, at);
  return /[{}]/.test(name) ? undefined : name;
}

/**
 * What an operator stored (`sluice limits`, `sluice deny`): an identifier's entry
 * (`<prefix>:<name>:{<identifier>}%limit`) or a limiter's index of them (`<prefix>:<name>:%limit`),
 * with the limiter's name; undefined for any other key.
 */
export function storedOf(key: string, prefix: string): { name: string; kind: StoredKind } | undefined {
  const kind = key.endsWith('%limit') ? 'limit' : key.endsWith('%deny') ? 'deny' : undefined;
  if (kind === undefined || !key.startsWith(`${prefix}:`)) return undefined;
  const index = `:%${kind}`;
  const name = key.endsWith(index)
    ? key.slice(prefix.length + 1, -index.length)
    : limiterOf(key.slice(0, -(kind.length + 1)), prefix);
  return name === undefined || name === '' || /[{}]/.test(name) ? undefined : { name, kind };
}

/**
 * What is wrong with a stored entry or index, if anything. A limit is configuration, kept until
 * cleared: never a finding. A denial always ends: one without an expiry is. Their TTLs are not the
 * policy's to judge (a denial of an hour under a policy of a second is right).
 */
export function judgeStored(
  key: string,
  name: string,
  kind: StoredKind,
  type: string,
  ttlMs: number,
  primary: string,
): Finding | undefined {
  if (kind === 'limit' || ttlMs !== -1) return undefined;
  return {
    key,
    limiter: name,
    primary,
    problems: ['no-expiry'],
    type,
    ttlMs,
    expectedType: undefined,
    maxTtlMs: undefined,
  };
}

/** What is wrong with one key, if anything; a TTL is judged only against a policy from the user's config. */
export function judge(
  key: string,
  name: string | undefined,
  policy: Policy | undefined,
  type: string,
  ttlMs: number,
  primary: string,
): Finding | undefined {
  const problems: Problem[] = [];
  let expectedType: string | undefined;
  if (name !== undefined) {
    expectedType = policy === undefined ? 'string or zset' : stateType(policy);
    const ok = policy === undefined ? type === 'string' || type === 'zset' : type === expectedType;
    if (!ok) problems.push('unexpected-type');
  }
  const longest = policy === undefined ? undefined : maxTtlMs(policy);
  if (ttlMs === -1) problems.push('no-expiry');
  else if (longest !== undefined && ttlMs > longest * TTL_SLACK_FACTOR) problems.push('ttl-too-long');
  if (problems.length === 0) return undefined;
  return { key, limiter: name ?? OTHER, primary, problems, type, ttlMs, expectedType, maxTtlMs: longest };
}

/**
 * The PEXPIRE `--fix` sends for a finding, if any. A key without an expiry gets `--ttl`, capped at
 * its policy's longest (NX: only if it still has none). A TTL is only ever cut (LT) to the longest
 * its policy sets, and only when that policy is known from the user's config.
 */
export function fixFor(finding: Finding, fixTtlMs: number): Array<string | number> | undefined {
  if (finding.problems.includes('no-expiry')) {
    const ttl = finding.maxTtlMs === undefined ? fixTtlMs : Math.min(fixTtlMs, finding.maxTtlMs);
    return [finding.key, ttl, 'NX'];
  }
  if (finding.problems.includes('ttl-too-long') && finding.maxTtlMs !== undefined) {
    return [finding.key, finding.maxTtlMs, 'LT'];
  }
  return undefined;
}
