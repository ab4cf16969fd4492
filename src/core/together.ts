// How a batch is decided (see Pipeline.batch): side by side, or on one store as one script, where every
// key is looked at and `limit` takes from all only when all allow.
import type { SluiceError } from '../errors.js';
import type { CallParts } from '../operations.js';
import { OPERATIONS } from '../operations.js';
import { atomicRequestsError } from '../stores/atomic.js';
import type { Decision, Operation, Store, StoreFailure, StoreResult } from '../types.js';
import type { Answers } from './answers.js';
import type { Call } from './call.js';
import type { Pipeline } from './pipeline.js';
import type { TogetherAnswer } from './waits.js';

/** One call of a batch: its limiter's pipeline, and the call as `Pipeline.call` takes it. */
export interface BatchRequest {
  readonly pipeline: Pipeline;
  readonly operation: Operation;
  readonly identifier: unknown;
  readonly amount: unknown;
  readonly parts?: CallParts | undefined;
}

/**
 * What deciding a batch needs of each call's limiter, which its pipeline hands over privately: its
 * answers, its settings, and its ways to the store for one call and for calls together.
 */
export interface Member {
  readonly answers: Answers;
  readonly enforce: boolean;
  readonly timeoutMs: number;
  decide(call: Call): Promise<Decision>;
  together(calls: readonly Call[], keys: readonly string[]): Promise<TogetherAnswer>;
}

/** Decisions of calls decided together, and which took units (what a refused group gives back). */
export interface Decided {
  readonly decisions: Decision[];
  readonly taken: boolean[];
}

/** A batch's decisions in order, which took units, the store failure behind each, and its calls. */
export interface Batched extends Decided {
  readonly calls: readonly Call[];
  readonly errors: readonly (SluiceError | undefined)[];
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

/** Each call on its own; `members[i]` decides `calls[i]`. */
export async function sideBySide(members: readonly Member[], calls: readonly Call[]): Promise<Decided> {
  if (calls.length === 1) {
    // A batch of one (a middleware with one limiter): its decision, without gathering.
    const call = calls[0] as Call;
    const decision = await (members[0] as Member).decide(call);
    return { decisions: [decision], taken: [took(call, decision)] };
  }
  const decisions = await Promise.all(calls.map((call, i) => (members[i] as Member).decide(call)));
  return { decisions, taken: decisions.map((decision, i) => took(calls[i] as Call, decision)) };
}

/**
 * Calls of one store timed alike, by one script over every key; shadow limiters beside them, so
 * that their verdict can never take units from, or refuse, the limiters that enforce.
 */
export async function decideAtomic(
  store: Store,
  members: readonly Member[],
  calls: readonly Call[],
): Promise<Decided> {
  const keys = calls.map((call) => store.keyFor(call.name, call.identifier, call.tag));
  // A combination the store would refuse (keys on several slots) is the caller's mistake, not an
  // outage: refused here, before any failure policy could answer for it.
  const refused = atomicRequestsError(calls, keys);
  if (refused !== undefined) throw refused;
  const enforcing = members.filter((member) => member.enforce).length;
  if (enforcing === 0 || enforcing === calls.length) return decideTogether(members, calls, keys);
  const enforced = (_: unknown, i: number): boolean => (members[i] as Member).enforce;
  const shadow = (_: unknown, i: number): boolean => !(members[i] as Member).enforce;
  const [together, beside] = await Promise.all([
    decideTogether(members.filter(enforced), calls.filter(enforced), keys.filter(enforced)),
    sideBySide(members.filter(shadow), calls.filter(shadow)),
  ]);
  const decisions: Decision[] = [];
  const taken: boolean[] = [];
  let e = 0;
  let s = 0;
  for (const member of members) {
    const from = member.enforce ? together : beside;
    const at = member.enforce ? e++ : s++;
    decisions.push(from.decisions[at] as Decision);
    taken.push(from.taken[at] === true);
  }
  return { decisions, taken };
}

/** Calls of one store as one script; `members[i]` is the limiter of `calls[i]`, `keys[i]` its key. */
function decideTogether(
  members: readonly Member[],
  calls: readonly Call[],
  keys: readonly string[],
): Promise<Decided> | Decided {
  const answers = members.map((member) => member.answers);
  const hits = calls.map((call, i) => (answers[i] as Answers).cached(call));
  if (hits.some((hit) => hit !== undefined)) return refusedFromCache(calls, hits);
  // Each limiter keeps its own view of the store's health: while any is probing after a failure,
  // every call is answered by its failure policy, and probes admitted meanwhile are released.
  const admitted = calls.map((call, i) => (answers[i] as Answers).admit(call));
  if (admitted.includes(false)) {
    const decisions = calls.map((call, i) => {
      const answer = answers[i] as Answers;
      if (admitted[i] === true) answer.unadmit(call);
      return answer.skipped(call);
    });
    return { decisions, taken: decisions.map((decision, i) => took(calls[i] as Call, decision)) };
  }
  // The batch waits no longer than its most impatient limiter.
  let asking = members[0] as Member;
  for (const member of members) if (member.timeoutMs < asking.timeoutMs) asking = member;
  return asking
    .together(calls, keys)
    .then((results) =>
      Array.isArray(results)
        ? answered(answers, calls, results)
        : failed(answers, calls, results.failure, results.error),
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
  answers: readonly Answers[],
  calls: readonly Call[],
  results: readonly StoreResult[],
): Decided {
  const first = calls[0] as Call;
  const granted = OPERATIONS[first.operation].takes && results.every((result) => result.allowed);
  const decisions = calls.map((call, i) => (answers[i] as Answers).decision(call, results[i] as StoreResult));
  return { decisions, taken: calls.map(() => granted) };
}

function failed(
  answers: readonly Answers[],
  calls: readonly Call[],
  failure: StoreFailure,
  error: unknown,
): Decided {
  const decisions = calls.map((call, i) => (answers[i] as Answers).failure(call, failure, error));
  // A fallback store decides each call on its own: what it granted is given back if one refuses.
  return { decisions, taken: decisions.map((decision, i) => took(calls[i] as Call, decision)) };
}
