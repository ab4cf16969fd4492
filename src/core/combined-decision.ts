// The decision of several limiters together: which denied, the longest wait, the fewest left.
import type { Decision } from '../types.js';

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

/** Folds the members' decisions into one (see {@link CombinedDecision}); `names` are the limiters'. */
export function combineDecisions(
  names: readonly string[],
  decisions: readonly Decision[],
  allowed: boolean,
): CombinedDecision {
  const members = decisions.map((decision, i) => member(names[i] as string, decision));
  let binding = 0;
  let remaining = Number.POSITIVE_INFINITY;
  let resetMs = 0;
  let retryAfterMs = 0;
  let reason: Decision['reason'];
  const deniedBy: string[] = [];
  members.forEach((decision, i) => {
    const best = members[binding] as MemberDecision;
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
  const headline = members[binding] as MemberDecision;
  return {
    allowed,
    limit: headline.limit,
    remaining: Number.isFinite(remaining) ? remaining : 0,
    resetMs,
    retryAfterMs: allowed ? 0 : retryAfterMs,
    ...(reason === undefined ? {} : { reason }),
    limiter: headline.name,
    deniedBy,
    decisions: members,
  };
}

/** One limiter's decision with its name. */
function member(name: string, decision: Decision): MemberDecision {
  return { name, ...decision };
}
