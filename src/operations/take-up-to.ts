// `takeUpTo`: takes as many units as are free, up to `n`, at least 1; or refuses and takes nothing.
import { withFields } from '../copy.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { Decision, Limiter, Policy, TakeDecision } from '../types.js';
import { checkUnits } from './checks.js';
import { DECISION, type OperationEntry, wire } from './entry.js';
import type { OperationRunner } from './runner.js';

// No operands; back: the units granted (0 when refused).
const WIRE = wire('7', 0, 1);

/**
 * The rules whose algorithm takes part of a request (each file's branch for op '7', Lua and twin).
 * A concurrency policy holds slots by lease, and a region's part of a global budget holds only what
 * the ledger granted it: neither takes a partial grant.
 */
const PARTIAL = new Set<string>(['fixed-window', 'sliding-log', 'sliding-window', 'gcra']);

/** `n`: units as for `limit`, from a policy that can grant part of a request. */
function checkTakeUpTo(option: string, amount: unknown, policy: Policy): SluiceError | undefined {
  if (!PARTIAL.has(policy.rule.name)) {
    return new SluiceError(
      ERROR_CODES.UNSUPPORTED_OPERATION,
      `Expected a policy that takeUpTo() applies to (fixedWindow, slidingWindow, slidingLog, gcra or tokenBucket), got ${policy.description}: it cannot grant part of a request.`,
    );
  }
  return checkUnits(option, amount, policy);
}

/** The decision with `granted` as the store gave it, or, when it did not decide, what the decision let through. */
function granted(decision: Decision, n: number): TakeDecision {
  const given = (decision as Partial<TakeDecision>).granted;
  if (given !== undefined) return decision as TakeDecision;
  return withFields(decision, { granted: decision.allowed && decision.reason !== 'denied' ? n : 0 });
}

export const TAKE_UP_TO: OperationEntry = {
  ...DECISION,
  ...WIRE,
  amountOption: 'n',
  checkAmount: checkTakeUpTo,
  takes: true,
  // What it took is `granted`, not its `n`: it is not part of groups, which give back by the cost.
  undo: undefined,
  // A partial grant needs one unit, and its refusal says not even one is free (the wait is for one): so it is looked
  // up and remembered at cost 1. A denial remembered for a cost of 2 or more says nothing of one unit and lets it
  // through to the store; one remembered for 1 (its own, or a limit of 1's) answers it, and any call after it.
  denyCache: 'lookup',
  denyCost: () => 1,
  readsDenial: true,
  // A decision like limit's; its units are those it took, not the `n` it asked for.
  counts: { decisions: true, units: 'granted', charges: false },
  atomic: false,
  answer: (decision, [units = 0]): TakeDecision =>
    withFields(decision, { granted: decision.allowed ? units : 0 }),
  // The failure policy's `open` lets the whole request through; `closed`, none of it.
  unanswered: granted,
  // In shadow mode the caller is let through with what was really taken (0 when it would be refused).
  shadow: (decision, shadowed) => withFields(shadowed, { granted: granted(decision, 0).granted }),
};

/** `limiter.takeUpTo(identifier, n, options?)`. */
export function takeUpToMethod(runner: OperationRunner): Limiter['takeUpTo'] {
  return (identifier, n, options) =>
    runner.call('takeUpTo', identifier, n, options).then((decision) => granted(decision, n));
}
