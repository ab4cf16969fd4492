// Calls about what an earlier call took (a give-back, a renewal, a settle's refund or charge), decided
// where that was taken: in the store, or in the fallback store when the fallback decided it.
import { entryOf } from '../operations.js';
import type { Decision, Lease, Operation } from '../types.js';
import type { Call } from './call.js';
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
  const after = { call, decision };
  // Only the clock can refuse it (a give-back or a renewal answers a store failure by the failure
  // policy): then nothing is asked, and what was taken stays taken (the strict side).
  const answer = await pipeline
    .call(operation, call.identifier, call.cost, undefined, { operands, after })
    .catch(() => undefined);
  // The fallback store's answer to a give-back of its own decision, or the store's; not the failure policy's.
  return decision.reason === 'fallback' || answer?.reason === undefined ? answer : undefined;
}

/**
 * Gives back (`refund`) or takes more (`charge`) of what a call took, under the same policy and
 * key, where it was taken: in the store, or in the fallback store when the fallback decided it.
 * The store's answer; `undefined` for the fallback store's, or when the clock fails (nothing is
 * asked). A charge the store fails rejects with its error (OperationEntry.onStoreFailure).
 */
export async function adjust(
  pipeline: Pipeline,
  call: Call,
  decision: Decision,
  operation: Operation,
  amount: number,
  settleId?: string,
): Promise<Decision | undefined> {
  // A settle's id goes last (see NO_SETTLE): the store applies it once.
  const own = settleId === undefined ? undefined : entryOf(operation, call.policy).operandsOf?.(call.policy);
  const operands = own === undefined ? undefined : [...own.slice(0, -1), settleId as string];
  const asked = pipeline.call(operation, call.identifier, amount, undefined, {
    operands,
    after: { call, decision },
  });
  // A give-back the clock prevents leaves the units taken (the strict side); a charge says why it
  // was not made, as it does when the store fails it.
  const answer = operation === 'charge' ? await asked : await asked.catch(() => undefined);
  return decision.reason === 'fallback' ? undefined : answer;
}
