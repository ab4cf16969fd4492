// Rate-limit response headers from decisions: which policies to show, the numbers made safe, the styles' dispatch.
import { type Decision, isStoreFailure } from '../types.js';
import { describesUnit, type HeaderStyle, RATELIMIT_FIELD_STYLES, STYLE_WRITERS } from './header-styles.js';
import { countsRequests, type PolicyDecision, retryAfterSeconds, tightest } from './header-values.js';

export { HEADER_STYLES, type HeaderStyle } from './header-styles.js';
export {
  isEnforcedDenial,
  type PolicyDecision,
  retryAfterSeconds,
  sfString,
  wholeSeconds,
  wholeUnits,
} from './header-values.js';

/** Options of {@link rateLimitHeaders}. */
export interface HeaderOptions {
  /**
   * One style or several; `ietf`, `draft-8` and `draft-7` exclude each other (the first wins).
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
 * Whether the decision's numbers describe real state. Shadow decisions stay invisible to clients,
 * and a decision made without the store (`store-error`, `timeout`) has no numbers worth telling.
 */
function isReportable(decision: Decision): boolean {
  return decision.wouldAllow === undefined && !isStoreFailure(decision.reason);
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

/** The styles written, in order: duplicates dropped, and one of those that write `RateLimit`. */
export function chosenStyles(style: HeaderOptions['style']): HeaderStyle[] {
  const list = style === undefined ? ['ietf' as const] : typeof style === 'string' ? [style] : [...style];
  // `RateLimit` can hold one style: the first one asked for.
  const fieldStyle = list.find((item) => RATELIMIT_FIELD_STYLES.includes(item));
  return list.filter(
    (item, i) => list.indexOf(item) === i && (item === fieldStyle || !RATELIMIT_FIELD_STYLES.includes(item)),
  );
}

/**
 * The response headers for the decisions taken on one request, in the chosen styles (see
 * {@link HeaderStyle}). `Retry-After` is present whenever a policy refused the request. Every
 * number is a whole number of at least 0 (`w` at least 1). Framework-free: hand the record to any
 * response.
 *
 * @example
 * import { createLimiter, fixedWindow, MemoryStore } from 'sluice';
 * import { rateLimitHeaders } from 'sluice/http';
 * const limiter = createLimiter({ store: new MemoryStore(), policy: fixedWindow({ limit: 100, windowMs: 60_000 }), name: 'api' });
 * const decision = await limiter.limit('client-42');
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
  return headersIn(entries, chosenStyles(options.style), options.now);
}

/** {@link rateLimitHeaders} in styles already chosen (see `chosenStyles`): the middleware chooses once. */
export function headersIn(
  entries: readonly PolicyDecision[],
  styles: readonly HeaderStyle[],
  now?: number,
): Record<string, string> {
  const headers: Record<string, string> = {};
  const visible = perPolicy(entries.filter((entry) => isReportable(entry.decision)));
  if (visible.length > 0) {
    const at = now ?? Date.now();
    const requestsOnly = visible.every(countsRequests);
    for (const style of styles) {
      // A policy in a unit the style cannot name is left out of it: nothing false is said.
      const shown = requestsOnly ? visible : visible.filter((entry) => describesUnit(style, entry.unit));
      if (shown.length > 0) STYLE_WRITERS[style](headers, shown, at);
    }
  }
  const retryAfter = retryAfterSeconds(entries);
  if (retryAfter !== undefined) headers['Retry-After'] = String(retryAfter);
  return headers;
}
