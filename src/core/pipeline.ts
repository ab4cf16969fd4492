// The decision pipeline: one call, or calls on one store decided as one script. Every phase is a
// method of Member; these functions only put them in order.
import { performance } from 'node:perf_hooks';
import type { Decision, Store, StoreResult } from '../types.js';
import type { Call } from './call.js';
import type { Expiring } from './deadlines.js';
import type { Member } from './member.js';

/** Decisions of calls decided together, and which took units (what a refused group gives back). */
export interface Decided {
  readonly decisions: Decision[];
  readonly taken: boolean[];
}

/**
 * Whether a decision took units: the policy's verdict allowed (in shadow mode too: a shadow
 * limiter counts as it would if enforced), and the store or the fallback store made it. A denial
 * takes nothing, nor does a cached denial or an answer of the failure policy's `allow` or `deny`.
 * After a timeout the server may still have taken the units: they are left to expire rather than
 * given back when they may never have been taken (the strict side).
 */
export function consumed(decision: Decision): boolean {
  return (
    (decision.wouldAllow ?? decision.allowed) &&
    (decision.reason === undefined || decision.reason === 'fallback')
  );
}

/**
 * Decides one call: the deny cache, then the store in process, or (once its first connection is
 * made) within the deadline, or the failure policy while the call's shard is failing.
 */
export function decideOne(call: Call): Promise<Decision> {
  const member = call.member;
  const cached = member.cached(call);
  if (cached !== undefined) return Promise.resolve(cached);
  if (member.inProcess) return Promise.resolve(decideInProcess(member, call));
  // A process just started waits for its connection rather than fail open (or closed) at once.
  const connecting = member.store.untilReady?.();
  if (connecting !== undefined) {
    return connecting.then(
      () => ask(member, call),
      (error: unknown) => member.failed(call, 'store-error', error),
    );
  }
  return ask(member, call);
}

/**
 * Decides a transient call (see Member.transientCall): on a store that decides in process, the call
 * goes back to its limiter once decided, for the next one.
 */
export function decideTransient(call: Call): Promise<Decision> {
  const member = call.member;
  if (!member.inProcess) return decideOne(call);
  const decision =
    member.denyCache === undefined
      ? decideInProcess(member, call)
      : (member.cached(call) ?? decideInProcess(member, call));
  member.release(call);
  return Promise.resolve(decision);
}

function decideInProcess(member: Member, call: Call): Decision {
  // A decision is timed one in 16 (reading the clock twice costs about what an in-process decision does).
  if (member.observed) call.askedAt = member.timesThisOne() ? performance.now() : Number.NaN;
  let result: StoreResult;
  try {
    result = (member.store as Required<Pick<Store, 'decideNow'>>).decideNow(call);
  } catch (error) {
    return member.failed(call, 'store-error', error);
  }
  return member.answered(call, result);
}

/** Asks the store within the deadline; the first of its answer and the deadline settles the call. */
function ask(member: Member, call: Call): Promise<Decision> {
  if (!member.admit(call)) return Promise.resolve(member.skipped(call));
  return new Promise<Decision>((resolve) => {
    call.resolve = resolve;
    if (member.observed) call.askedAt = member.timesThisOne() ? performance.now() : Number.NaN;
    member.deadlines.track(call);
    const store = member.store;
    try {
      // The call takes its answer itself where the store allows: no promise of the store's own.
      if (store.enqueue !== undefined) store.enqueue(call);
      else store.decide(call).then(call.answer.bind(call), call.fail.bind(call));
    } catch (error) {
      call.fail(error);
    }
  });
}

/**
 * Decides calls on one store as one script: every key is looked at, and `limit` takes from all only
 * when all allow. The calls are checked, share one time, and their keys one slot (see all()).
 */
export function decideAtomic(calls: readonly Call[]): Promise<Decided> | Decided {
  const members = calls.map((call) => call.member);
  const hits = calls.map((call) => call.member.cached(call));
  if (hits.some((hit) => hit !== undefined)) return refusedFromCache(calls, hits);
  const store = (members[0] as Member).store;
  if (store.decideAllNow !== undefined) {
    let results: StoreResult[];
    try {
      results = store.decideAllNow(calls);
    } catch (error) {
      return failedTogether(calls, error, 'store-error');
    }
    return answeredTogether(calls, results);
  }
  const connecting = store.untilReady?.();
  if (connecting !== undefined) {
    return connecting.then(
      () => askTogether(calls),
      (error: unknown) => failedTogether(calls, error, 'store-error'),
    );
  }
  return askTogether(calls);
}

/**
 * A member's remembered denial refuses the group without asking the store. The members that were
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

function answeredTogether(calls: readonly Call[], results: readonly StoreResult[]): Decided {
  const granted = calls[0]?.operation === 'limit' && results.every((result) => result.allowed);
  const decisions = calls.map((call, i) => call.member.answered(call, results[i] as StoreResult));
  return { decisions, taken: calls.map(() => granted) };
}

function failedTogether(calls: readonly Call[], error: unknown, failure: 'store-error' | 'timeout'): Decided {
  const decisions = calls.map((call) => call.member.failed(call, failure, error));
  // A fallback store decides each member on its own: what it granted is given back if one refuses.
  return { decisions, taken: decisions.map((decision, i) => isLimit(calls, i) && consumed(decision)) };
}

function isLimit(calls: readonly Call[], i: number): boolean {
  return calls[i]?.operation === 'limit';
}

function askTogether(calls: readonly Call[]): Promise<Decided> | Decided {
  // Each member keeps its own view of the store's health: while any is probing after a failure,
  // every member answers by its failure policy, and probes admitted meanwhile are released.
  const admitted = calls.map((call) => call.member.admit(call));
  if (admitted.includes(false)) {
    const decisions = calls.map((call, i) => {
      if (admitted[i] === true && call.probe) call.member.health.release(call.shard);
      return call.member.skipped(call);
    });
    return { decisions, taken: decisions.map((decision, i) => isLimit(calls, i) && consumed(decision)) };
  }
  // The group waits no longer than its most impatient member.
  let first = calls[0] as Call;
  for (const call of calls) {
    if (call.member.deadlines.timeoutMs < first.member.deadlines.timeoutMs) first = call;
  }
  const deadlines = first.member.deadlines;
  return new Promise<Decided>((resolve) => {
    const entry: Expiring = {
      deadline: 0,
      settled: false,
      expire: () => resolve(failedTogether(calls, undefined, 'timeout')),
    };
    const askedAt = performance.now();
    for (const call of calls) call.askedAt = askedAt;
    deadlines.track(entry);
    const store = first.member.store;
    let pending: Promise<StoreResult[]>;
    try {
      pending = (store.decideAll as NonNullable<typeof store.decideAll>)(calls);
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (results) => {
        if (deadlines.settle(entry)) resolve(answeredTogether(calls, results));
      },
      (error: unknown) => {
        if (deadlines.settle(entry)) resolve(failedTogether(calls, error, 'store-error'));
      },
    );
  });
}
