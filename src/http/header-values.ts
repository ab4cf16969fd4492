// The numbers and names every header style shares: whole units and seconds, sf-strings, the most constraining policy.
import type { Decision } from '../types.js';

/** One policy's decision on a request, with what the headers need to describe the policy. */
export interface PolicyDecision {
  /** The policy's name in the headers and problem body; a limiter's `name`. */
  readonly name: string;
  /** The period in which the policy grants `decision.limit` units, in ms (`w`); see `Policy.windowMs`. */
  readonly windowMs: number;
  readonly decision: Decision;
  /**
   * The `pk` parameter's bytes: a keyed hash of the client's key, never the key itself (see the
   * middleware's `partitionKey` option). Written by the `ietf` and `draft-8` styles.
   */
  readonly partitionKey?: Uint8Array | undefined;
  /** What one unit of the policy is (see `Policy.unit`); absent for requests. */
  readonly unit?: string | undefined;
}

/**
 * The quota units the IETF fields can name (`qu`), as registered: `requests` is their default and
 * goes unwritten. A policy in another unit (`tokens`) is left out of the fields rather than
 * described as requests.
 */
export const REGISTERED_UNITS: readonly string[] = ['requests', 'content-bytes', 'concurrent-requests'];

/** Whether a policy counts requests (no unit given, or `requests`). */
export function countsRequests(entry: PolicyDecision): boolean {
  return entry.unit === undefined || entry.unit === 'requests';
}

/**
 * Whether the request is refused by this decision. A decision in shadow mode (`wouldAllow` set)
 * never refuses: shadow mode observes, it does not answer 429.
 */
export function isEnforcedDenial(decision: Decision): boolean {
  return !decision.allowed && decision.wouldAllow === undefined;
}

/** A whole number of at least 0: NaN and negatives become 0, fractions round down. */
export function wholeUnits(value: number): number {
  return Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}

/** Milliseconds as whole seconds, rounded up (a client that waits this long is not early). */
export function wholeSeconds(ms: number): number {
  return Number.isFinite(ms) && ms > 0 ? Math.ceil(ms / 1000) : 0;
}

/** A policy's window as `w`: whole seconds, at least 1. */
export function windowSeconds(entry: PolicyDecision): number {
  return Math.max(1, wholeSeconds(entry.windowMs));
}

/** Milliseconds until the client should expect more quota: the wait when refused, the reset otherwise. */
export function msUntilMore(decision: Decision): number {
  return isEnforcedDenial(decision) ? decision.retryAfterMs : decision.resetMs;
}

export function secondsUntilMore(decision: Decision): number {
  return wholeSeconds(msUntilMore(decision));
}

/** `Retry-After` in seconds for a refused request: the longest wait among the refusing policies, at least 1. */
export function retryAfterSeconds(entries: readonly PolicyDecision[]): number | undefined {
  let seconds: number | undefined;
  for (const { decision } of entries) {
    if (!isEnforcedDenial(decision)) continue;
    seconds = Math.max(seconds ?? 1, wholeSeconds(decision.retryAfterMs));
  }
  return seconds;
}

/** An RFC 8941 sf-string: printable ASCII with `"` and `\` escaped; other characters become `?`. */
export function sfString(text: string): string {
  const printable = text.replace(/[^\x20-\x7e]/g, '?');
  return `"${printable.replace(/[\\"]/g, (char) => `\\${char}`)}"`;
}

/** The most constraining entry: a refusal with the longest wait, else the least remaining. */
export function tightest(entries: readonly PolicyDecision[]): PolicyDecision | undefined {
  let best: PolicyDecision | undefined;
  const rank = (entry: PolicyDecision): [number, number, number] => [
    isEnforcedDenial(entry.decision) ? 0 : 1,
    wholeUnits(entry.decision.remaining),
    -secondsUntilMore(entry.decision),
  ];
  for (const entry of entries) {
    if (best === undefined) {
      best = entry;
      continue;
    }
    const [a, b] = [rank(entry), rank(best)];
    if (a[0] < b[0] || (a[0] === b[0] && (a[1] < b[1] || (a[1] === b[1] && a[2] < b[2])))) best = entry;
  }
  return best;
}
