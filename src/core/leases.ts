// A concurrency policy's leases in the pipeline: their ids, the leases callers hand back, and what the scripts' fields say.
import { randomFillSync } from 'node:crypto';
import { withFields } from '../copy.js';
import { describeValue, ERROR_CODES, SluiceError } from '../errors.js';
import { OPERATIONS } from '../operations.js';
import type { Decision, Lease, Operation, StoreRequest } from '../types.js';

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

/** Ids the scripts accept as members: base64url, as newLeaseId() makes them (no '#', no '/'). */
const LEASE_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** The lease given to release() or extend(), checked; `option` names it in the message. */
export function checkLease(option: string, lease: unknown): Lease | SluiceError {
  const given = lease as Partial<Lease> | null;
  const shaped =
    typeof given === 'object' &&
    given !== null &&
    typeof given.id === 'string' &&
    LEASE_ID.test(given.id) &&
    typeof given.token === 'number' &&
    Number.isSafeInteger(given.token) &&
    given.token >= 1;
  if (shaped) return given as Lease;
  return new SluiceError(
    ERROR_CODES.INVALID_LEASE,
    `Expected \`${option}\` to be the lease of an allowed acquisition ({ id, token, expiresAt } from decision.lease), got ${describeLease(lease)}.`,
  );
}

function describeLease(lease: unknown): string {
  if (typeof lease !== 'object' || lease === null) return describeValue(lease);
  const { id, token } = lease as Record<string, unknown>;
  return `an object with id ${describeValue(id)} and token ${describeValue(token)}`;
}

/** The operands of a release: the lease's id. */
export function releaseOperands(lease: unknown): readonly string[] | SluiceError {
  const checked = checkLease('lease', lease);
  return checked instanceof SluiceError ? checked : [checked.id];
}

/**
 * The operands of an extend: the lease's id, its new length ('' for the policy's), its token. A
 * length is at most the policy's `leaseMs` (`longest`), so that no holder keeps slots longer than
 * that past its last renewal: the bound a crashed holder's slots are freed within.
 */
export function extendOperands(
  lease: unknown,
  leaseMs: unknown,
  longest: number | undefined,
): readonly string[] | SluiceError {
  const checked = checkLease('lease', lease);
  if (checked instanceof SluiceError) return checked;
  if (leaseMs === undefined) return [checked.id, '', String(checked.token)];
  const most = longest ?? 1;
  if (typeof leaseMs !== 'number' || !Number.isSafeInteger(leaseMs) || leaseMs < 1 || leaseMs > most) {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected \`leaseMs\` to be a whole number of milliseconds from 1 to the policy's leaseMs (${most}), got ${describeValue(leaseMs)}: a lease never holds its slots longer than that past its last renewal.`,
    );
  }
  return [checked.id, String(leaseMs), String(checked.token)];
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
