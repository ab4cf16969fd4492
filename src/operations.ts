// Every operation a limiter asks of a store, one entry each: its wire code and what the pipeline does around it.

import { withFields } from './copy.js';
import { describeValue, ERROR_CODES, SluiceError } from './errors.js';
import type { ChargeDecision, Decision, Operation, Policy, StoreRequest } from './types.js';

/** The operations of the table: the decisions (see {@link Operation}) and `reset`, which forgets. */
export type OperationName = Operation | 'reset';

/**
 * What one operation is, for every layer that handles it: the scripts (its code), the stores (its
 * extra arguments and result fields), and the pipeline (validation, deny cache, failure, refunds).
 * Adding an operation is an entry here, its part of the Lua scripts and of the pure twins; see
 * docs/contributing.md.
 */
export interface OperationEntry {
  /** The code the scripts read as `op` (ARGV[1]); `undefined` when no script runs (`reset` is a DEL). */
  readonly code: string | undefined;
  /** The option that names the operation's amount in error messages: `cost`, `amount`. */
  readonly amountOption: 'cost' | 'amount';
  /** Checks the amount against the policy; the error names `amountOption`. */
  readonly checkAmount: (option: string, amount: unknown, policy: Policy) => SluiceError | undefined;
  /**
   * Whether a granted call took units, where the store (or the fallback store) decided it: what a
   * refused group gives back, with {@link OperationEntry.undo}.
   */
  readonly takes: boolean;
  /** The operation that gives back what this one took (a refused group, the middleware's count modes). */
  readonly undo: Operation | undefined;
  /**
   * The deny cache: `lookup`, a remembered denial answers and a new denial is remembered; `forget`,
   * what is remembered of the identifier is dropped first (it may be granted more); `none`.
   */
  readonly denyCache: 'lookup' | 'forget' | 'none';
  /**
   * A store that fails or runs out of time: `policy`, the limiter's `onStoreError` answers (a
   * decision with a `reason`); `reject`, the call rejects with the error.
   */
  readonly onStoreFailure: 'policy' | 'reject';
  /** Whether the operation may be decided with others by one script (an atomic all()). */
  readonly atomic: boolean;
  /** Arguments each request carries to its script after the cost (`StoreRequest.operands`); 0 for none. */
  readonly operands: number;
  /** Integers each record of the script's reply carries after the decision (`StoreResult.fields`); 0 for none. */
  readonly fields: number;
  /** The request's `operands` for a call under `policy` (as many as `operands`); absent when there are none. */
  readonly operandsOf?: (policy: Policy) => readonly string[];
  /** The decision a result with `fields` makes, from the decision of its first four; absent when there are none. */
  readonly answer?: (decision: Decision, fields: readonly number[]) => Decision;
}

/** Units a request may take or give back: a positive safe integer, at most what the policy can ever grant. */
export function checkUnits(option: string, amount: unknown, policy: Policy): SluiceError | undefined {
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 1) {
    return new SluiceError(
      ERROR_CODES.INVALID_COST,
      `Expected \`${option}\` to be a positive integer, got ${describeValue(amount)}.`,
    );
  }
  if (amount > policy.maxCost) {
    return new SluiceError(
      ERROR_CODES.COST_EXCEEDS_LIMIT,
      `Expected \`${option}\` to be at most ${policy.maxCost}, the most ${policy.description} can ever grant, got ${amount} (number).`,
    );
  }
  return undefined;
}

/** Refuses an operation on a policy it does not apply to; `leases` says which policies it needs. */
function unsupported(operation: Operation, policy: Policy, leases: boolean): SluiceError {
  const why = leases
    ? `${operation}() acts on a concurrency() policy's leases`
    : `a concurrency() policy's slots come back with release(identifier, lease)`;
  return new SluiceError(
    ERROR_CODES.UNSUPPORTED_OPERATION,
    `Expected a policy that ${operation}() applies to, got ${policy.description}: ${why}.`,
  );
}

/** The error of an operation the policy refuses (Policy.refuses), or undefined when it takes it. */
export function refusal(operation: 'charge' | 'reserve', policy: Policy): SluiceError | undefined {
  const why = policy.refuses?.[operation];
  return why === undefined ? undefined : new SluiceError(ERROR_CODES.INVALID_OPTION, why);
}

/** Units a policy spends over time: any but a lease policy's (whose slots are released, not refunded). */
function checkRefund(option: string, amount: unknown, policy: Policy): SluiceError | undefined {
  return policy.leaseMs === undefined
    ? checkUnits(option, amount, policy)
    : unsupported('refund', policy, false);
}

/** An operation on a lease: only a lease policy's (the lease itself is checked by core/leases.ts). */
function leaseCheck(operation: Operation): OperationEntry['checkAmount'] {
  return (_option, _amount, policy) =>
    policy.leaseMs === undefined ? unsupported(operation, policy, true) : undefined;
}

/**
 * The longest a call may wait for its slot, in ms (`wait()`'s `maxWaitMs`): one hour. Longer waits
 * belong in a job queue; and with it, a GCRA key lives at most this (and a pause) beyond its burst.
 */
export const MAX_WAIT_MS = 3_600_000;

/** The longest pause an upstream's answer may set on an identifier, in ms (`Retry-After` beyond it is cut to it). */
export const MAX_PAUSE_MS = 3_600_000;

/**
 * What a `schedule` answers besides the decision: how long until its slot, and the pause that holds
 * the identifier (what is left of it, and how far it moved the slots handed out before it), in ms.
 */
export interface ScheduledDecision extends Decision {
  readonly waitMs: number;
  readonly pausedMs: number;
  readonly shiftMs: number;
}

/** Units a `schedule` may take: as for `limit`, from a policy that hands out future slots. */
function checkScheduled(option: string, amount: unknown, policy: Policy): SluiceError | undefined {
  if (policy.schedules !== true) {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected a policy that hands out future slots (gcra or tokenBucket) to schedule a request, got ${policy.description}.`,
    );
  }
  return checkUnits(option, amount, policy);
}

/**
 * A charge's amount: a positive safe integer, however large. It is not bounded by what the policy
 * can grant at once: usage already served is taken whole, up to the policy's `maxDebt`.
 */
export function checkCharge(option: string, amount: unknown): SluiceError | undefined {
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 1) {
    return new SluiceError(
      ERROR_CODES.INVALID_COST,
      `Expected \`${option}\` to be a positive integer, got ${describeValue(amount)}.`,
    );
  }
  return undefined;
}

/**
 * The settle a refund or a charge carries last, as a decimal integer: a reservation's id, which the
 * store remembers until the window of the state it settled is over, so that the same settle sent
 * again (a retry after a lost reply, another process) changes nothing; `NO_SETTLE` for none.
 */
export const NO_SETTLE = '0';

/** A refund's operands: no settle, unless a reservation's settle gives its id. */
const REFUND_OPERANDS: readonly string[] = [NO_SETTLE];

/** The debt a charge may leave, as its script reads it (the policy's `maxDebt`, else one allowance), and no settle. */
function chargeOperands(policy: Policy): readonly string[] {
  return [String(policy.maxDebt ?? policy.limit), NO_SETTLE];
}

/**
 * A charge's decision: always allowed (the units were taken), with its fields: the wait until a
 * request of cost 1 would pass (the record, which is an allowed one, has no room for it), the debt
 * and the units cut off.
 */
function chargeAnswer(decision: Decision, fields: readonly number[]): ChargeDecision {
  return {
    allowed: true,
    limit: decision.limit,
    remaining: decision.remaining,
    resetMs: decision.resetMs,
    retryAfterMs: fields[0] ?? 0,
    debt: fields[1] ?? 0,
    cutOff: fields[2] ?? 0,
  };
}

const DECISION = { checkAmount: checkUnits, onStoreFailure: 'policy', operands: 0, fields: 0 } as const;

/** What a request and its result carry beyond a decision: operands sent, fields received. */
export interface RecordShape {
  readonly operands: number;
  readonly fields: number;
}

/**
 * A lease policy's acquisition (`limit`): the new lease's id goes to the script, and its token,
 * expiry and the slots reclaimed from expired leases come back (see algorithms/concurrency.lua).
 */
const ACQUIRE: RecordShape = { operands: 1, fields: 3 };

/** The operands and fields of a request: its operation's, or a lease policy's acquisition's. */
export function shapeOf(request: Pick<StoreRequest, 'operation' | 'policy'>): RecordShape {
  const { operation } = request;
  return operation === 'limit' && request.policy.leaseMs !== undefined ? ACQUIRE : OPERATIONS[operation];
}

/** The table. The Lua scripts read the same codes (src/stores/redis/lua, src/algorithms/*.lua). */
export const OPERATIONS: Readonly<Record<OperationName, OperationEntry>> = {
  limit: {
    ...DECISION,
    code: '0',
    amountOption: 'cost',
    takes: true,
    undo: 'refund',
    denyCache: 'lookup',
    atomic: true,
  },
  peek: {
    ...DECISION,
    code: '1',
    amountOption: 'cost',
    takes: false,
    undo: undefined,
    denyCache: 'lookup',
    atomic: true,
  },
  refund: {
    ...DECISION,
    code: '2',
    amountOption: 'amount',
    checkAmount: checkRefund,
    takes: false,
    undo: undefined,
    denyCache: 'forget',
    atomic: false,
    // The settle it belongs to (NO_SETTLE).
    operands: 1,
    operandsOf: () => REFUND_OPERANDS,
  },
  schedule: {
    ...DECISION,
    code: '4',
    amountOption: 'cost',
    checkAmount: checkScheduled,
    takes: true,
    undo: 'refund',
    // A remembered denial says nothing of a slot further on; a slot taken makes none of them wrong.
    denyCache: 'none',
    atomic: false,
    // The longest wait in ms (-1 only reads) and an upstream's pause in ms (0 for none).
    operands: 2,
    // The wait until the slot, the pause left, and how far the pause moved the slots handed out.
    fields: 3,
    answer: (decision, [waitMs = 0, pausedMs = 0, shiftMs = 0]): ScheduledDecision =>
      withFields(decision, { waitMs, pausedMs, shiftMs }),
  },
  charge: {
    code: '3',
    amountOption: 'amount',
    // A lease policy's slots are held and released, never charged after the fact.
    checkAmount: (option, amount, policy) =>
      refusal('charge', policy) ??
      (policy.leaseMs === undefined ? checkCharge(option, amount) : unsupported('charge', policy, false)),
    takes: true,
    undo: 'refund',
    // A charge never refuses, so there is no denial to remember; what it owes shows in later denials.
    denyCache: 'none',
    // Usage already served that the store did not record must not pass silently: the caller hears of it.
    onStoreFailure: 'reject',
    atomic: false,
    // The debt it may leave, and the settle it belongs to (NO_SETTLE).
    operands: 2,
    fields: 3,
    operandsOf: chargeOperands,
    answer: chargeAnswer,
  },
  // A lease's id; back: whether it was live and is freed, and the slots reclaimed from expired ones.
  release: {
    ...DECISION,
    code: '5',
    amountOption: 'amount',
    checkAmount: leaseCheck('release'),
    takes: false,
    undo: undefined,
    denyCache: 'forget',
    atomic: false,
    operands: 1,
    fields: 2,
  },
  // A lease's id, its new length ('' for the policy's) and its token (for the answer's lease, unread
  // by the script); back: whether it was live and is renewed, its new expiry, the slots reclaimed.
  extend: {
    ...DECISION,
    code: '6',
    amountOption: 'amount',
    checkAmount: leaseCheck('extend'),
    takes: false,
    undo: undefined,
    denyCache: 'none',
    atomic: false,
    operands: 3,
    fields: 3,
  },
  reset: {
    code: undefined,
    amountOption: 'amount',
    checkAmount: () => undefined,
    takes: false,
    undo: undefined,
    denyCache: 'forget',
    onStoreFailure: 'reject',
    atomic: false,
    operands: 0,
    fields: 0,
  },
};
