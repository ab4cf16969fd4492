// The registry of operations: one module each (its checks, operands, answer, undo, deny cache, failure rule).
import type { Limiter, Operation, Policy, StoreRequest } from '../types.js';
import { CHARGE, chargeMethod } from './charge.js';
import type { OperationEntry, OperationName, RecordShape } from './entry.js';
import { EXTEND, extendMethod, RELEASE, releaseMethod } from './leases.js';
import { LIMIT, limitMethod } from './limit.js';
import { PEEK, peekMethod } from './peek.js';
import { REFUND, refundMethod } from './refund.js';
import { RESET } from './reset.js';
import type { OperationRunner } from './runner.js';
import { SCHEDULE } from './schedule.js';
import { TAKE_UP_TO, takeUpToMethod } from './take-up-to.js';

export { checkCharge } from './charge.js';
export { checkUnits, MAX_PAUSE_MS, MAX_WAIT_MS, NO_SETTLE, refusal } from './checks.js';
export type { OperationEntry, OperationName, RecordShape } from './entry.js';
export { checkLease, hasLeaseFields, newLeaseId } from './leases.js';
export type { CallParts, OperationRunner } from './runner.js';
export type { ScheduledDecision } from './schedule.js';

/**
 * Every operation by name. The scripts read each one's code and shape from its request (lua/single.lua
 * takes `wire` as ARGV[1]); an algorithm's Lua branches on the code.
 */
export const OPERATIONS: Readonly<Record<OperationName, OperationEntry>> = {
  limit: LIMIT,
  peek: PEEK,
  refund: REFUND,
  charge: CHARGE,
  schedule: SCHEDULE,
  release: RELEASE,
  extend: EXTEND,
  takeUpTo: TAKE_UP_TO,
  reset: RESET,
};

/**
 * The entry a call of `operation` under `policy` runs: the operation's, or under a lease policy
 * what it names in its place (OperationEntry.underLease: `limit` is a lease's acquisition).
 */
export function entryOf(operation: Operation, policy: Pick<Policy, 'leaseMs'>): OperationEntry {
  const entry = OPERATIONS[operation];
  return policy.leaseMs === undefined ? entry : (entry.underLease ?? entry);
}

/** The operands and fields of a request: its entry's (see entryOf). */
export function shapeOf(request: Pick<StoreRequest, 'operation' | 'policy'>): RecordShape {
  return entryOf(request.operation, request.policy);
}

/** The limiter's methods that are one operation each. */
export type OperationMethods = Pick<
  Limiter,
  'limit' | 'peek' | 'refund' | 'charge' | 'release' | 'extend' | 'takeUpTo'
>;

/** Each operation's public method, run on one limiter's pipeline (see RateLimiter). */
export function operationMethods(runner: OperationRunner): OperationMethods {
  return {
    limit: limitMethod(runner),
    peek: peekMethod(runner),
    refund: refundMethod(runner),
    charge: chargeMethod(runner),
    release: releaseMethod(runner),
    extend: extendMethod(runner),
    takeUpTo: takeUpToMethod(runner),
  };
}
