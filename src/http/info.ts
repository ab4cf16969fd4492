// The decision as a handler reads it (`req.rateLimit`, `request.rateLimit`, `c.get('rateLimit')`, `info(request)`).
import { isStoreFailure } from '../types.js';
import { type PolicyDecision, tightest } from './header-values.js';

/**
 * What the rate limiter decided for a request, for the handler: "97 calls left". The numbers are
 * those of the most constraining policy (as the single-valued headers show them); `policies` has
 * every policy that decided the request so far, in order.
 *
 * @example
 * app.get('/quota', (req, res) => {
 *   res.json({ remaining: req.rateLimit?.remaining, resetsInMs: req.rateLimit?.resetMs });
 * });
 */
export interface RateLimitInfo {
  /** The quota of the most constraining policy: its `limit`, or this request's `limit` option. */
  readonly limit: number;
  /** Whole units left under it after this request. */
  readonly remaining: number;
  /** Milliseconds until it is back to a full allowance. */
  readonly resetMs: number;
  /** The identifier the request was charged under (several joined by spaces). */
  readonly key: string;
  /** Every policy that decided the request so far, with its decision. */
  readonly policies: readonly PolicyDecision[];
}

/**
 * The info for a request's decisions so far. Its numbers come from the policies the headers show:
 * shadow decisions and those of a failing store count only when nothing else is known.
 */
export function rateLimitInfo(entries: readonly PolicyDecision[], key: string): RateLimitInfo | undefined {
  const known = entries.filter(
    ({ decision }) => decision.wouldAllow === undefined && !isStoreFailure(decision.reason),
  );
  const tight = tightest(known.length > 0 ? known : entries);
  if (tight === undefined) return undefined;
  const { decision } = tight;
  return {
    limit: decision.limit,
    remaining: decision.remaining,
    resetMs: decision.resetMs,
    key,
    policies: [...entries],
  };
}
