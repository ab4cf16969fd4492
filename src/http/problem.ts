// RFC 9457 problem details for refused requests, and the whole refusal (status, headers, body) built from decisions.

import { isStoreFailure } from '../types.js';
import {
  type HeaderOptions,
  isEnforcedDenial,
  type PolicyDecision,
  rateLimitHeaders,
  retryAfterSeconds,
  wholeSeconds,
  wholeUnits,
} from './headers.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** The problem types of draft-ietf-httpapi-ratelimit-headers (section 5). */
export const PROBLEM_TYPES = {
  quotaExceeded: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
  temporaryReducedCapacity: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
} as const;

/** An RFC 9457 problem details object. `violated-policies` names the policies that refused. */
export interface ProblemDetails {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly 'violated-policies': readonly string[];
  readonly [member: string]: unknown;
}

/** Overrides for the problem body. */
export interface ProblemOptions {
  /**
   * The problem type URI.
   * @default 'https://iana.org/assignments/http-problem-types#quota-exceeded'
   */
  readonly type?: string;
  /**
   * A short summary that does not change between occurrences.
   * @default 'Too Many Requests'
   */
  readonly title?: string;
}

/** Everything a refusal sends: status, headers (with Retry-After and Content-Type), and the body. */
export interface ProblemRefusal {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly problem: ProblemDetails;
  /** `problem` as JSON, ready to send. */
  readonly body: string;
}

function failedStore(entry: PolicyDecision): boolean {
  return isStoreFailure(entry.decision.reason);
}

function describe(entry: PolicyDecision): string {
  if (entry.concurrent === true) return `"${entry.name}" (${wholeUnits(entry.decision.limit)} at once)`;
  const seconds = Math.max(1, wholeSeconds(entry.windowMs));
  return `"${entry.name}" (${wholeUnits(entry.decision.limit)} per ${seconds} s)`;
}

/** What the refusing policies are, by kind: a quota over time, or too many requests in flight. */
function refusedFor(quota: readonly PolicyDecision[]): string {
  const unique = [...new Map(quota.map((entry) => [entry.name, entry])).values()];
  const parts: string[] = [];
  for (const [concurrent, lead] of [
    [false, 'Quota exceeded for'],
    [true, 'Too many concurrent requests for'],
  ] as const) {
    const policies = unique.filter((entry) => (entry.concurrent === true) === concurrent).map(describe);
    if (policies.length > 0) {
      parts.push(`${lead} ${policies.length === 1 ? 'policy' : 'policies'} ${policies.join(', ')}`);
    }
  }
  return parts.join('; ');
}

/** A 403 for a denied client: by a limiter's stored denials (`names`, for `retry` seconds), or by the `deny` option. */
function forbidden(names: readonly string[], retry: number | undefined): ProblemDetails {
  const by = names.map((name) => `"${name}"`).join(', ');
  return {
    type: 'about:blank',
    title: 'Forbidden',
    status: 403,
    detail: retry === undefined ? 'This client is denied.' : `This client is denied by ${by} for ${retry} s.`,
    'violated-policies': names,
  };
}

/**
 * The problem details for a refused request, or `undefined` when no decision refused it. A quota
 * refusal is a 429 of type quota-exceeded (its detail says which policies limit requests over time,
 * and which requests in flight); when every refusal came from a failing store (a limiter that fails
 * closed), it is a 503 of type temporary-reduced-capacity: the client did nothing wrong. A client a
 * limiter denies (`limiter.deny()`) gets a 403.
 *
 * @example
 * problemDetails([{ name: 'api', windowMs: 60_000, decision }]);
 * // { type: 'https://iana.org/assignments/http-problem-types#quota-exceeded', title: 'Too Many Requests',
 * //   status: 429, detail: 'Quota exceeded for policy "api" (100 per 60 s). Retry in 12 s.',
 * //   'violated-policies': ['api'] }
 */
export function problemDetails(
  entries: readonly PolicyDecision[],
  options: ProblemOptions = {},
): ProblemDetails | undefined {
  const refusing = entries.filter((entry) => isEnforcedDenial(entry.decision));
  if (refusing.length === 0) return undefined;
  const denied = refusing.filter((entry) => entry.decision.reason === 'denied');
  if (denied.length > 0) {
    return forbidden([...new Set(denied.map((entry) => entry.name))], retryAfterSeconds(denied) ?? 1);
  }
  const quota = refusing.filter((entry) => !failedStore(entry));
  const retry = retryAfterSeconds(refusing) ?? 1;
  const names = [...new Set((quota.length > 0 ? quota : refusing).map((entry) => entry.name))];
  if (quota.length === 0) {
    return {
      type: PROBLEM_TYPES.temporaryReducedCapacity,
      title: 'Service Unavailable',
      status: 503,
      detail: `The rate limiter could not decide (${names.map((name) => `"${name}"`).join(', ')}). Retry in ${retry} s.`,
      'violated-policies': names,
    };
  }
  return {
    type: options.type ?? PROBLEM_TYPES.quotaExceeded,
    title: options.title ?? 'Too Many Requests',
    status: 429,
    detail: `${refusedFor(quota)}. Retry in ${retry} s.`,
    'violated-policies': names,
  };
}

/**
 * The whole refusal for decisions that refused a request, or `undefined` when none did: status,
 * headers (rate-limit fields in the chosen style, `Retry-After`, `Content-Type`) and the JSON body.
 *
 * @example
 * const refusal = refusalFor(entries, { style: 'ietf' });
 * if (refusal) return new Response(refusal.body, { status: refusal.status, headers: refusal.headers });
 */
export function refusalFor(
  entries: readonly PolicyDecision[],
  options: HeaderOptions & ProblemOptions = {},
): ProblemRefusal | undefined {
  const problem = problemDetails(entries, options);
  if (problem === undefined) return undefined;
  const headers = rateLimitHeaders(entries, options);
  headers['Content-Type'] = PROBLEM_CONTENT_TYPE;
  return { status: problem.status, headers, problem, body: JSON.stringify(problem) };
}

/**
 * The refusal of a client on the middleware's `deny` list: 403, no rate-limit fields (no limiter
 * was asked) and no `Retry-After` (the list does not end).
 *
 * @example
 * const refusal = listRefusal();
 * // { status: 403, headers: { 'Content-Type': 'application/problem+json' }, problem: { title: 'Forbidden', ... }, body }
 */
export function listRefusal(): ProblemRefusal {
  const problem = forbidden([], undefined);
  return {
    status: 403,
    headers: { 'Content-Type': PROBLEM_CONTENT_TYPE },
    problem,
    body: JSON.stringify(problem),
  };
}

/**
 * The refusal of a penalty (the middleware's `ban` or `block`): 403 for a ban, 429 for a block,
 * with the rate-limit fields of every decision so far and `Retry-After` the penalty's length.
 *
 * @example
 * const refusal = penaltyRefusal([{ name: 'api:ban', windowMs: 600_000, decision }], 403);
 * // { status: 403, headers: { 'Retry-After': '600', ... }, problem: { title: 'Forbidden', ... }, body }
 */
export function penaltyRefusal(
  entries: readonly PolicyDecision[],
  status: 403 | 429,
  options: HeaderOptions & ProblemOptions = {},
): ProblemRefusal {
  const refusing = entries.filter((entry) => isEnforcedDenial(entry.decision));
  const names = [...new Set(refusing.map((entry) => entry.name))];
  const retry = retryAfterSeconds(refusing) ?? 1;
  const problem: ProblemDetails =
    status === 403
      ? {
          type: 'about:blank',
          title: 'Forbidden',
          status,
          detail: `Too many requests of this client were refused: it is banned for ${retry} s.`,
          'violated-policies': names,
        }
      : {
          type: options.type ?? PROBLEM_TYPES.quotaExceeded,
          title: options.title ?? 'Too Many Requests',
          status,
          detail: `Quota exceeded: this client is blocked for ${retry} s.`,
          'violated-policies': names,
        };
  const headers = rateLimitHeaders(entries, options);
  headers['Content-Type'] = PROBLEM_CONTENT_TYPE;
  return { status, headers, problem, body: JSON.stringify(problem) };
}
