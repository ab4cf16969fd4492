// Calls about what an earlier call took (a give-back, a renewal, a settle's refund or charge), decided
// where that was taken: in the store, or in the fallback store when the fallback decided it.
import { SluiceError } from '../errors.js';
import type { Decision, Lease, Operation } from '../types.js';
import { Call } from './call.js';
import { undoOf, withoutLease } from './leases.js';
import type { Pipeline } from './pipeline.js';

/**
 * Gives back what a call took (its operation's `undo`; a lease's release), where it was taken: in
 * the store, or in the fallback store. The store's answer to the give-back, if it made one. One
 * that fails leaves the units taken until they expire: the strict side.
 */
export async function giveBack(
  pipeline: Pipeline,
  call: Call,
  decision: Decision,
): Promise<Decision | undefined> {
  const undo = undoOf(call, decision);
  if (undo === undefined) return undefined;
  const lease = decision.lease;
  const operands = lease === undefined ? undefined : [lease.id];
  const answer = await follow(pipeline, call, decision, undo, operands);
  return answer === undefined ? undefined : withoutLease(answer);
}

/**
 * Renews the lease a call's decision holds, where it was taken (see `giveBack`): the store's
 * answer (`extended` says whether the lease was still live), or undefined when there is none.
 */
export function extendLease(
  pipeline: Pipeline,
  call: Call,
  decision: Decision & { readonly lease: Lease },
): Promise<Decision | undefined> {
  const { id, token } = decision.lease;
  return follow(pipeline, call, decision, 'extend', [id, '', String(token)]);
}

/** A call about what an earlier call took (a give-back, a renewal), decided where that was taken. */
async function follow(
  pipeline: Pipeline,
  call: Call,
  decision: Decision,
  operation: Operation,
  operands: readonly string[] | undefined,
): Promise<Decision | undefined> {
  const next = new Call(pipeline.name, call.policy, operation, call.identifier, call.cost, call.tag);
  next.operands = operands ?? next.operands;
  const now = pipeline.time();
  if (now instanceof SluiceError) return undefined;
  if (decision.reason === 'fallback') {
    // A give-back is decided at the time of what it gives back; a renewal, now.
    next.now = operation === 'extend' ? now : call.now;
    return pipeline.giveBackFallback(next);
  }
  next.now = now;
  const answer = await pipeline.decide(next);
  return answer.reason === undefined ? answer : undefined;
}

/**
 * Gives back (`refund`) or takes more (`charge`) of what a call took, under the same policy and
 * key, where it was taken: in the store, or in the fallback store when the fallback decided it.
 * The store's answer; `undefined` for the fallback store's, or when the clock fails (nothing is
 * asked). A charge the store fails rejects with its error (OperationEntry.onStoreFailure).
 */
export function adjust(
  pipeline: Pipeline,
  call: Call,
  decision: Decision,
  operation: Operation,
  amount: number,
  settleId?: string,
): Promise<Decision | undefined> {
  const next = new Call(pipeline.name, call.policy, operation, call.identifier, amount, call.tag);
  // A settle's id goes last (see NO_SETTLE): the store applies it once.
  if (settleId !== undefined && next.operands !== undefined)
    next.operands = [...next.operands.slice(0, -1), settleId];
  if (decision.reason === 'fallback') {
    next.now = call.now;
    pipeline.giveBackFallback(next);
    return Promise.resolve(undefined);
  }
  const now = pipeline.time();
  // A give-back the clock prevents leaves the units taken (the strict side); a charge says why it was not made.
  if (now instanceof SluiceError)
    return operation === 'charge' ? Promise.reject(now) : Promise.resolve(undefined);
  next.now = now;
  return pipeline.decide(next);
}
