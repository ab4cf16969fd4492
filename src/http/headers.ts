// Rate-limit response headers from decisions: IETF RateLimit/RateLimit-Policy, draft-6, legacy X-RateLimit-*, Retry-After.
import { type Decision, isStoreFailure } from '../types.js';

/**
 * Which header fields to write.
 * - `ietf`: `RateLimit-Policy` and `RateLimit` as structured-field lists, one item per policy
 *   (draft-ietf-httpapi-ratelimit-headers-10/-11).
 * - `draft-6`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds from now).
 * - `legacy`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix seconds).
 */
export type HeaderStyle = 'ietf' | 'draft-6' | 'legacy';

export const HEADER_STYLES: readonly HeaderStyle[] = ['ietf', 'draft-6', 'legacy'];

/** One policy's decision on a request, with what the headers need to describe the policy. */
export interface PolicyDecision {
  /** The policy's name in the headers and problem body; a limiter's `name`. */
  readonly name: string;
  /** The period the policy speaks of, in ms (`w`); a limiter's `policy.windowMs`. */
  readonly windowMs: number;
  readonly decision: Decision;
}

/** Options of {@link rateLimitHeaders}. */
export interface HeaderOptions {
  /**
   * One style or several; the IETF fields and the draft-6 fields do not collide.
   * @default 'ietf'
   */
  readonly style?: HeaderStyle | readonly HeaderStyle[];
  /**
   * Now, in ms since the epoch: only the legacy `X-RateLimit-Reset`, a Unix time, needs it.
   * @default Date.now()
   */
  readonly now?: number;
}

/**
 * Whether the request is refused by this decision. A decision in shadow mode (`wouldAllow` set)
 * never refuses: shadow mode observes, it does not answer 429.
 */
export function isEnforcedDenial(decision: Decision): boolean {
  return !decision.allowed && decision.wouldAllow === undefined;
}

/**
 * Whether the decision's numbers describe real state. Shadow decisions stay invisible to clients,
 * and a decision made without the store (`store-error`, `timeout`) has no numbers worth telling.
 */
function isReportable(decision: Decision): boolean {
  return decision.wouldAllow === undefined && !isStoreFailure(decision.reason);
}

/** A whole number of at least 0: NaN and negatives become 0, fractions round down. */
export function wholeUnits(value: number): number {
  return Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}

/** Milliseconds as whole seconds, rounded up (a client that waits this long is not early). */
export function wholeSeconds(ms: number): number {
  return Number.isFinite(ms) && ms > 0 ? Math.ceil(ms / 1000) : 0;
}

/** Milliseconds until the client should expect more quota: the wait when refused, the reset otherwise. */
function msUntilMore(decision: Decision): number {
  return isEnforcedDenial(decision) ? decision.retryAfterMs : decision.resetMs;
}

function secondsUntilMore(decision: Decision): number {
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
function tightest(entries: readonly PolicyDecision[]): PolicyDecision | undefined {
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

/** One entry per policy name, keeping the most constraining decision of each. */
function perPolicy(entries: readonly PolicyDecision[]): PolicyDecision[] {
  const byName = new Map<string, PolicyDecision[]>();
  for (const entry of entries) {
    const list = byName.get(entry.name);
    if (list === undefined) byName.set(entry.name, [entry]);
    else list.push(entry);
  }
  return [...byName.values()].map((list) => tightest(list) as PolicyDecision);
}

function styles(style: HeaderOptions['style']): ReadonlySet<HeaderStyle> {
  if (style === undefined) return new Set(['ietf']);
  return new Set(typeof style === 'string' ? [style] : style);
}

/**
 * The response headers for the decisions taken on one request. Each policy adds its own item to
 * `RateLimit` and `RateLimit-Policy`; the single-valued styles describe the most constraining one.
 * `Retry-After` is present whenever a policy refused the request. Every number is a whole number
 * of at least 0 (`w` at least 1). Framework-free: hand the record to any response.
 *
 * @example
 * const decision = await limiter.limit(key);
 * rateLimitHeaders([{ name: limiter.name, windowMs: limiter.policy.windowMs, decision }], {
 *   style: ['ietf', 'draft-6'],
 * });
 * // { 'RateLimit-Policy': '"api";q=100;w=60', RateLimit: '"api";r=99;t=60',
 * //   'RateLimit-Limit': '100', 'RateLimit-Remaining': '99', 'RateLimit-Reset': '60' }
 */
export function rateLimitHeaders(
  entries: readonly PolicyDecision[],
  options: HeaderOptions = {},
): Record<string, string> {
  const headers: Record<string, string> = {};
  const chosen = styles(options.style);
  const visible = perPolicy(entries.filter((entry) => isReportable(entry.decision)));
  if (visible.length > 0 && chosen.has('ietf')) {
    headers['RateLimit-Policy'] = visible
      .map(({ name, windowMs, decision }) => {
        const windowSeconds = Math.max(1, wholeSeconds(windowMs));
        return `${sfString(name)};q=${wholeUnits(decision.limit)};w=${windowSeconds}`;
      })
      .join(', ');
    headers.RateLimit = visible
      .map(({ name, decision }) => {
        return `${sfString(name)};r=${wholeUnits(decision.remaining)};t=${secondsUntilMore(decision)}`;
      })
      .join(', ');
  }
  const tight = tightest(visible);
  if (tight !== undefined && chosen.has('draft-6')) {
    headers['RateLimit-Limit'] = String(wholeUnits(tight.decision.limit));
    headers['RateLimit-Remaining'] = String(wholeUnits(tight.decision.remaining));
    headers['RateLimit-Reset'] = String(secondsUntilMore(tight.decision));
  }
  if (tight !== undefined && chosen.has('legacy')) {
    const now = options.now ?? Date.now();
    const nowMs = Number.isFinite(now) && now > 0 ? now : 0;
    const untilMs = Math.max(
      0,
      Number.isFinite(msUntilMore(tight.decision)) ? msUntilMore(tight.decision) : 0,
    );
    headers['X-RateLimit-Limit'] = String(wholeUnits(tight.decision.limit));
    headers['X-RateLimit-Remaining'] = String(wholeUnits(tight.decision.remaining));
    headers['X-RateLimit-Reset'] = String(Math.ceil((nowMs + untilMs) / 1000));
  }
  const retryAfter = retryAfterSeconds(entries);
  if (retryAfter !== undefined) headers['Retry-After'] = String(retryAfter);
  return headers;
}
