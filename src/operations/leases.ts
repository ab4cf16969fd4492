// A concurrency policy's leases: `acquire` (its `limit`), `release` and `extend`.
import { describeValue, ERROR_CODES, SluiceError } from '../errors.js';
import type { Lease, Limiter, Operation, Policy } from '../types.js';
import { unsupported } from './checks.js';
import { COUNTS_NOTHING, DECISION, type OperationEntry, type RecordShape, wire } from './entry.js';
import type { OperationRunner } from './runner.js';

/**
 * A lease policy's acquisition (`limit`): the new lease's id goes to the script, and its token,
 * expiry and the slots reclaimed from expired leases come back (see algorithms/concurrency.lua).
 */
export const ACQUIRE: RecordShape = wire('0', 1, 3);

/** An operation on a lease: only a lease policy's (the lease itself is checked by core/leases.ts). */
function leaseCheck(operation: Operation): OperationEntry['checkAmount'] {
  return (_option, _amount, policy: Policy) =>
    policy.leaseMs === undefined ? unsupported(operation, policy, true) : undefined;
}

// A lease's id; back: whether it was live and is freed, and the slots reclaimed from expired ones.
const RELEASE_WIRE = wire('5', 1, 2);

export const RELEASE: OperationEntry = {
  ...DECISION,
  ...RELEASE_WIRE,
  amountOption: 'amount',
  checkAmount: leaseCheck('release'),
  takes: false,
  undo: undefined,
  denyCache: 'forget',
  // Counted in the lease policy's slots (metrics/leases.ts), as every decision on them is.
  counts: COUNTS_NOTHING,
  atomic: false,
};

// A lease's id, its new length ('' for the policy's) and its token (for the answer's lease, unread
// by the script); back: whether it was live and is renewed, its new expiry, the slots reclaimed.
const EXTEND_WIRE = wire('6', 3, 3);

export const EXTEND: OperationEntry = {
  ...DECISION,
  ...EXTEND_WIRE,
  amountOption: 'amount',
  checkAmount: leaseCheck('extend'),
  takes: false,
  undo: undefined,
  denyCache: 'none',
  counts: COUNTS_NOTHING,
  atomic: false,
};

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

/** `limiter.release(identifier, lease, options?)`. */
export function releaseMethod(runner: OperationRunner): Limiter['release'] {
  return (identifier, lease, options) =>
    runner.run('release', identifier, 1, options, releaseOperands(lease));
}

/** `limiter.extend(identifier, lease, leaseMs?, options?)`. */
export function extendMethod(runner: OperationRunner): Limiter['extend'] {
  return (identifier, lease, leaseMs, options) =>
    runner.run('extend', identifier, 1, options, extendOperands(lease, leaseMs, runner.policy.leaseMs));
}
