// A concurrency policy's leases in the pipeline: what gives back a decision, and a decision whose lease was given back.
// The acquisition, release and renewal themselves (ids, operands, answers) are operations: src/operations/leases.ts.
import { entryOf } from '../operations.js';
import type { Decision, Operation, Policy } from '../types.js';

export { hasLeaseFields } from '../operations.js';

/** The operation that gives back what a call's decision took, as its entry says (see OperationEntry.undoOf). */
export function undoOf(
  call: { readonly operation: Operation; readonly policy: Pick<Policy, 'leaseMs'> },
  decision: Decision,
): Operation | undefined {
  const entry = entryOf(call.operation, call.policy);
  return entry.undoOf === undefined ? entry.undo : entry.undoOf(decision);
}

/** A decision whose lease was given back: the same, without the lease. */
export function withoutLease(decision: Decision): Decision {
  if (decision.lease === undefined) return decision;
  const { lease: _released, ...rest } = decision;
  return rest;
}
