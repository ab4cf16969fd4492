// `charge`: takes units whether or not they are there (usage known after the fact), into debt up to `maxDebt`.
import { withFields } from '../copy.js';
import { describeValue, ERROR_CODES, SluiceError } from '../errors.js';
import type { ChargeDecision, Decision, Limiter, Policy } from '../types.js';
import { NO_SETTLE, refusal, unsupported } from './checks.js';
import { type OperationEntry, wire } from './entry.js';
import type { OperationRunner } from './runner.js';

// The debt it may leave and the settle it belongs to; back: the wait for a cost of 1, the debt, the units cut off.
const WIRE = wire('3', 2, 3);

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

export const CHARGE: OperationEntry = {
  ...WIRE,
  amountOption: 'amount',
  // A lease policy's slots are held and released, never charged after the fact.
  checkAmount: (option, amount, policy) =>
    refusal('charge', policy) ??
    (policy.leaseMs === undefined ? checkCharge(option, amount) : unsupported('charge', policy, false)),
  takes: true,
  undo: 'refund',
  // A charge never refuses, so there is no denial to remember; what it owes shows in later denials.
  denyCache: 'none',
  readsDenial: false,
  // Usage already served that the store did not record must not pass silently: the caller hears of it.
  onStoreFailure: 'reject',
  // Not a decision (it never refuses): counted apart, so that a `limit` pays nothing for it.
  counts: { decisions: false, units: 'none', charges: true },
  atomic: false,
  operandsOf: chargeOperands,
  answer: chargeAnswer,
  // A charge is allowed whatever the policy says; its debt is the caller's to see in shadow mode too.
  shadow: (decision) => withFields(decision, { wouldAllow: true }),
};

/** `limiter.charge(identifier, amount, options?)`: its decision is its answer's, with `debt` and `cutOff`. */
export function chargeMethod(runner: OperationRunner): Limiter['charge'] {
  return (identifier, amount, options) =>
    runner.call('charge', identifier, amount, options) as Promise<ChargeDecision>;
}
