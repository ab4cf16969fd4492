// A concurrency policy's leases in the pipeline: their ids, the leases callers hand back, and what the scripts' fields say.
import { randomFillSync } from 'node:crypto';
import { withFields } from '../copy.js';
import { OPERATIONS } from '../operations.js';
import type { Decision, Operation, StoreRequest } from '../types.js';

/** Bytes of randomness in a lease id: 96 bits, 16 characters of base64url. */
const ID_BYTES = 12;
/** Ids drawn from the system's generator at a time (one call per 128 acquisitions). */
const POOL_IDS = 128;
let pool = Buffer.alloc(0);
let drawn = POOL_IDS;

/**
 * A new lease's id: random, so that no caller can guess another's and release it. Made here
 * rather than by the script, whose random numbers are the same on every run.
 */
export function newLeaseId(): string {
  if (drawn === POOL_IDS) {
    pool = randomFillSync(Buffer.alloc(ID_BYTES * POOL_IDS));
    drawn = 0;
  }
  const start = ID_BYTES * drawn++;
  return pool.toString('base64url', start, start + ID_BYTES);
}

/** The operands a call carries that the pipeline makes: a new lease's id when a lease policy acquires. */
export function ownOperands(
  operation: Operation,
  request: Pick<StoreRequest, 'policy'>,
): readonly string[] | undefined {
  return operation === 'limit' && request.policy.leaseMs !== undefined ? [newLeaseId()] : undefined;
}

/**
 * A decision with what a lease policy's result fields say (see algorithms/concurrency.lua): the
 * new lease of an allowed acquisition, whether a release freed its lease or an extend renewed it,
 * and the slots reclaimed from leases that had expired.
 */
export function withLeaseFields(
  decision: Decision,
  request: StoreRequest,
  fields: readonly number[],
): Decision {
  const operands = request.operands ?? [];
  let result: Decision = decision;
  let reclaimed = 0;
  if (request.operation === 'limit') {
    const [token = 0, expiresAt = 0, freed = 0] = fields;
    if (token > 0) result = withFields(decision, { lease: { id: operands[0] as string, token, expiresAt } });
    reclaimed = freed;
  } else if (request.operation === 'release') {
    result = withFields(decision, { released: fields[0] === 1 });
    reclaimed = fields[1] ?? 0;
  } else if (request.operation === 'extend') {
    const [extended = 0, expiresAt = 0, freed = 0] = fields;
    const lease = { id: operands[0] as string, token: Number(operands[2]), expiresAt };
    result =
      extended === 1
        ? withFields(decision, { extended: true, lease })
        : withFields(decision, { extended: false });
    reclaimed = freed;
  }
  return reclaimed > 0 ? withFields(result, { reclaimed }) : result;
}

/** The operation that gives back what a decision took: a lease's release, or the operation's undo. */
export function undoOf(operation: Operation, decision: Decision): Operation | undefined {
  return decision.lease === undefined ? OPERATIONS[operation].undo : 'release';
}

/** A decision whose lease was given back: the same, without the lease. */
export function withoutLease(decision: Decision): Decision {
  if (decision.lease === undefined) return decision;
  const { lease: _released, ...rest } = decision;
  return rest;
}

/** Whether a decision carries what a lease policy's fields add (see withLeaseFields). */
export function hasLeaseFields(decision: Decision): boolean {
  return (
    decision.lease !== undefined ||
    decision.released !== undefined ||
    decision.extended !== undefined ||
    decision.reclaimed !== undefined
  );
}
