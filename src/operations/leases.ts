// A concurrency policy's leases: `acquire` (what its `limit` runs), `release` and `extend`.
import { randomFillSync } from 'node:crypto';
import { withFields } from '../copy.js';
import { describeValue, ERROR_CODES, SluiceError } from '../errors.js';
import type { Decision, Lease, Limiter, Operation, Policy } from '../types.js';
import { checkUnits, unsupported } from './checks.js';
import { COUNTS_DECISION, COUNTS_NOTHING, DECISION, type OperationEntry, wire } from './entry.js';
import type { OperationRunner } from './runner.js';

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

/** A decision with the slots reclaimed from leases that had expired, when there were any. */
function withReclaimed(decision: Decision, reclaimed: number): Decision {
  return reclaimed > 0 ? withFields(decision, { reclaimed }) : decision;
}

/** Whether a decision carries what a lease policy's fields add (see the answers below). */
export function hasLeaseFields(decision: Decision): boolean {
  return (
    decision.lease !== undefined ||
    decision.released !== undefined ||
    decision.extended !== undefined ||
    decision.reclaimed !== undefined
  );
}

/**
 * In shadow mode: a lease taken is held as if enforced, so the caller gets it (and what the fields
 * say), to release; a decision without such fields is shadowed as any other (with its `reason`).
 */
function shadowLease(decision: Decision, shadowed: Decision): Decision {
  if (hasLeaseFields(decision)) return { ...decision, ...shadowed };
  return decision.reason === undefined ? shadowed : withFields(shadowed, { reason: decision.reason });
}

/**
 * A lease policy's acquisition, what its `limit` runs (LIMIT.underLease): a new lease's id goes to
 * the script, and its token, expiry and the slots reclaimed from expired leases come back (see
 * algorithms/concurrency.lua). Otherwise as `limit`: the same code, checks, deny cache and counts.
 */
export const ACQUIRE: OperationEntry = {
  ...DECISION,
  ...wire('0', 1, 3),
  amountOption: 'cost',
  checkAmount: checkUnits,
  takes: true,
  undo: 'release',
  // A decision that holds a lease gives it back by its release; one that does not (the failure
  // policy's) as `limit`'s would.
  undoOf: (decision) => (decision.lease === undefined ? 'refund' : 'release'),
  denyCache: 'lookup',
  readsDenial: true,
  counts: COUNTS_DECISION,
  atomic: true,
  operandsOf: () => [newLeaseId()],
  answer: (decision, [token = 0, expiresAt = 0, freed = 0], operands) => {
    const taken =
      token > 0 ? withFields(decision, { lease: { id: operands[0] as string, token, expiresAt } }) : decision;
    return withReclaimed(taken, freed);
  },
  shadow: shadowLease,
};

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
  answer: (decision, [released, reclaimed = 0]) =>
    withReclaimed(withFields(decision, { released: released === 1 }), reclaimed),
  shadow: shadowLease,
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
  answer: (decision, [extended = 0, expiresAt = 0, reclaimed = 0], operands) => {
    const lease = { id: operands[0] as string, token: Number(operands[2]), expiresAt };
    const renewed =
      extended === 1
        ? withFields(decision, { extended: true, lease })
        : withFields(decision, { extended: false });
    return withReclaimed(renewed, reclaimed);
  },
  shadow: shadowLease,
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
    runner.call('release', identifier, 1, options, { operands: releaseOperands(lease) });
}

/** `limiter.extend(identifier, lease, leaseMs?, options?)`. */
export function extendMethod(runner: OperationRunner): Limiter['extend'] {
  return (identifier, lease, leaseMs, options) =>
    runner.call('extend', identifier, 1, options, {
      operands: extendOperands(lease, leaseMs, runner.policy.leaseMs),
    });
}
