// Calls on one store decided as one script: every key is looked at, and `limit` takes from all only when all allow.
import { OPERATIONS } from '../operations.js';
import type { Decision, StoreFailure, StoreResult } from '../types.js';
import type { Call } from './call.js';
import type { Pipeline } from './pipeline.js';

/** Decisions of calls decided together, and which took units (what a refused group gives back). */
export interface Decided {
  readonly decisions: Decision[];
  readonly taken: boolean[];
}

/**
 * Whether a call's decision took units: its operation takes (OperationEntry.takes), the policy's
 * verdict allowed (in shadow mode too: a shadow limiter counts as it would if enforced), and the
 * store or the fallback store made it. A denial takes nothing, nor does a cached denial or an
 * answer of the failure policy's `allow` or `deny`. After a timeout the server may still have taken
 * the units: they are left to expire rather than given back when they may never have been taken
 * (the strict side).
 */
export function took(call: Call, decision: Decision): boolean {
  return (
    OPERATIONS[call.operation].takes &&
    (decision.wouldAllow ?? decision.allowed) &&
    (decision.reason === undefined || decision.reason === 'fallback')
  );
}

/**
 * Decides calls of one store as one script; `pipelines[i]` is the limiter of `calls[i]`, `keys[i]`
 * its key. The calls are checked, share one time, and their keys one slot (see Group).
 */
export function decideTogether(
  pipelines: readonly Pipeline[],
  calls: readonly Call[],
  keys: readonly string[],
): Promise<Decided> | Decided {
  const hits = calls.map((call, i) => (pipelines[i] as Pipeline).cached(call));
  if (hits.some((hit) => hit !== undefined)) return refusedFromCache(calls, hits);
  // Each limiter keeps its own view of the store's health: while any is probing after a failure,
  // every call is answered by its failure policy, and probes admitted meanwhile are released.
  const admitted = calls.map((call, i) => (pipelines[i] as Pipeline).admit(call));
  if (admitted.includes(false)) {
    const decisions = calls.map((call, i) => {
      const pipeline = pipelines[i] as Pipeline;
      if (admitted[i] === true) pipeline.unadmit(call);
      return pipeline.skipped(call);
    });
    return { decisions, taken: decisions.map((decision, i) => took(calls[i] as Call, decision)) };
  }
  // The group waits no longer than its most impatient limiter.
  let asking = pipelines[0] as Pipeline;
  for (const pipeline of pipelines) if (pipeline.timeoutMs < asking.timeoutMs) asking = pipeline;
  return asking
    .together(calls, keys)
    .then((results) =>
      Array.isArray(results)
        ? answered(pipelines, calls, results)
        : failed(pipelines, calls, results.failure, results.error),
    );
}

/**
 * A limiter's remembered denial refuses the group without asking the store. The calls that were
 * not asked report what is known of them, nothing (a full allowance, as when the store fails open),
 * with `reason: 'cached'`; their hooks hear nothing, since nothing was decided for them.
 */
function refusedFromCache(calls: readonly Call[], hits: readonly (Decision | undefined)[]): Decided {
  const decisions = calls.map((call, i): Decision => {
    const limit = call.policy.limit;
    return (
      hits[i] ?? { allowed: true, limit, remaining: limit, resetMs: 0, retryAfterMs: 0, reason: 'cached' }
    );
  });
  return { decisions, taken: calls.map(() => false) };
}

function answered(
  pipelines: readonly Pipeline[],
  calls: readonly Call[],
  results: readonly StoreResult[],
): Decided {
  const first = calls[0] as Call;
  const granted = OPERATIONS[first.operation].takes && results.every((result) => result.allowed);
  const decisions = calls.map((call, i) =>
    (pipelines[i] as Pipeline).decision(call, results[i] as StoreResult),
  );
  return { decisions, taken: calls.map(() => granted) };
}

function failed(
  pipelines: readonly Pipeline[],
  calls: readonly Call[],
  failure: StoreFailure,
  error: unknown,
): Decided {
  const decisions = calls.map((call, i) => (pipelines[i] as Pipeline).failure(call, failure, error));
  // A fallback store decides each call on its own: what it granted is given back if one refuses.
  return { decisions, taken: decisions.map((decision, i) => took(calls[i] as Call, decision)) };
}
