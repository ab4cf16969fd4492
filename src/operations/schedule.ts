// `schedule` (for wait()): takes units in the first future slot where they fit (GCRA and the token bucket).
import { withFields } from '../copy.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { Decision, Policy } from '../types.js';
import { checkUnits } from './checks.js';
import { COUNTS_DECISION, DECISION, type OperationEntry, wire } from './entry.js';

// The longest wait in ms (-1 only reads) and an upstream's pause in ms (0 for none); back: the wait until
// the slot, the pause left, and how far the pause moved the slots handed out.
const WIRE = wire('4', 2, 3);

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

export const SCHEDULE: OperationEntry = {
  ...DECISION,
  ...WIRE,
  amountOption: 'cost',
  checkAmount: checkScheduled,
  takes: true,
  undo: 'refund',
  // A remembered denial says nothing of a slot further on; a slot taken makes none of them wrong.
  denyCache: 'none',
  readsDenial: true,
  // The slots wait() takes are decisions: allowed, or denied beyond `maxWaitMs`.
  counts: COUNTS_DECISION,
  atomic: false,
  answer: (decision, [waitMs = 0, pausedMs = 0, shiftMs = 0]): ScheduledDecision =>
    withFields(decision, { waitMs, pausedMs, shiftMs }),
};
