// The decision of several limiters together: which denied, the longest wait, the fewest left.
import type { Limiter } from './limiter.js';
import type { Decision, StoreResult } from './types.js';

/** One limiter's part of a combined decision. */
export interface MemberDecision extends Decision {
  /** The limiter's name. */
  readonly name: string;
}

/**
 * The decision of several limiters together. The headline fields answer "may this request pass,
 * and if not, when": `allowed` only when every limiter allows; `retryAfterMs` the largest among
 * the limiters that denied; `remaining` the smallest; `resetMs` the largest; `limit` that of the
 * binding limiter (`limiter`).
 */
export interface CombinedDecision extends Decision {
  /**
   * The limiter the headline `limit` comes from: when denied, the denying limiter with the longest
   * wait; when allowed, the one with the fewest units left (the first, on ties).
   */
  readonly limiter: string;
  /** The names of the limiters that denied, in the order given to `all()`; empty when allowed. */
  readonly deniedBy: readonly string[];
  /**
   * Each limiter's decision, in the order given to `all()`. When the request was denied nothing
   * was taken from any of them, and each shows what it has now.
   */
  readonly decisions: readonly MemberDecision[];
}

/** Folds the members' decisions into one (see {@link CombinedDecision}). */
export function combineDecisions(decisions: readonly MemberDecision[], allowed: boolean): CombinedDecision {
  let binding = 0;
  let remaining = Number.POSITIVE_INFINITY;
  let resetMs = 0;
  let retryAfterMs = 0;
  let reason: Decision['reason'];
  const deniedBy: string[] = [];
  decisions.forEach((decision, i) => {
    const best = decisions[binding] as MemberDecision;
    if (
      allowed
        ? decision.remaining < best.remaining
        : !decision.allowed && (best.allowed || decision.retryAfterMs > best.retryAfterMs)
    ) {
      binding = i;
    }
    if (decision.remaining < remaining) remaining = decision.remaining;
    if (decision.resetMs > resetMs) resetMs = decision.resetMs;
    if (!decision.allowed) {
      deniedBy.push(decision.name);
      if (decision.retryAfterMs > retryAfterMs) retryAfterMs = decision.retryAfterMs;
    }
    if (reason === undefined && decision.reason !== undefined) reason = decision.reason;
  });
  const headline = decisions[binding] as MemberDecision;
  return {
    allowed,
    limit: headline.limit,
    remaining: Number.isFinite(remaining) ? remaining : 0,
    resetMs,
    retryAfterMs: allowed ? 0 : retryAfterMs,
    ...(reason === undefined ? {} : { reason }),
    limiter: headline.name,
    deniedBy,
    decisions,
  };
}

/** One limiter's decision, or a store's raw result for it, with the limiter's name and limit. */
export function member(limiter: Limiter, decision: Decision | StoreResult): MemberDecision {
  const shaped: MemberDecision = {
    name: limiter.name,
    allowed: decision.allowed,
    limit: limiter.policy.limit,
    remaining: decision.remaining,
    resetMs: decision.resetMs,
    retryAfterMs: decision.retryAfterMs,
  };
  const reason = (decision as Decision).reason;
  return reason === undefined ? shaped : { ...shaped, reason };
}
