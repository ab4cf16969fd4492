// `refund`: gives units back (at most what is in use); a reservation's settle sends its id, applied once.
import type { Limiter, Policy } from '../types.js';
import { checkUnits, NO_SETTLE, unsupported } from './checks.js';
import { COUNTS_NOTHING, DECISION, type OperationEntry, wire } from './entry.js';
import type { OperationRunner } from './runner.js';

// The settle it belongs to (NO_SETTLE).
const WIRE = wire('2', 1, 0);

/** A refund's operands: no settle, unless a reservation's settle gives its id. */
const REFUND_OPERANDS: readonly string[] = [NO_SETTLE];

/** Units a policy spends over time: any but a lease policy's (whose slots are released, not refunded). */
function checkRefund(option: string, amount: unknown, policy: Policy) {
  return policy.leaseMs === undefined
    ? checkUnits(option, amount, policy)
    : unsupported('refund', policy, false);
}

export const REFUND: OperationEntry = {
  ...DECISION,
  ...WIRE,
  amountOption: 'amount',
  checkAmount: checkRefund,
  takes: false,
  undo: undefined,
  denyCache: 'forget',
  counts: COUNTS_NOTHING,
  atomic: false,
  operandsOf: () => REFUND_OPERANDS,
};

/** `limiter.refund(identifier, amount = 1, options?)`. */
export function refundMethod(runner: OperationRunner): Limiter['refund'] {
  return (identifier, amount = 1, options) => runner.call('refund', identifier, amount, options);
}
