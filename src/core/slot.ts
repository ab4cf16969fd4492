// A future slot asked of the store in one call (`schedule`), as wait() and throttle() ask for it, and given back.

import { withFields } from '../copy.js';
import type { ScheduledDecision } from '../operations.js';
import type { Decision } from '../types.js';
import type { Call } from './call.js';
import { giveBack } from './follow-up.js';
import type { CallParts, Pipeline } from './pipeline.js';
import { took } from './together.js';

/**
 * The store's answer to a `schedule`: the decision (with its wait and the pause it saw; 0 when the
 * failure policy answered), and the way to give the slot back while it has not started. A small
 * value its holder acts on, like Go's `rate.Reservation`.
 */
export class Slot {
  readonly decision: ScheduledDecision;
  readonly #pipeline: Pipeline;
  readonly #call: Call;
  #given = false;

  constructor(pipeline: Pipeline, call: Call, decision: Decision) {
    this.#pipeline = pipeline;
    this.#call = call;
    const named = decision as Partial<ScheduledDecision>;
    // The failure policy's answers (allow, deny) carry no wait: they go, or not, now.
    this.decision =
      named.waitMs === undefined
        ? withFields(decision, { waitMs: 0, pausedMs: 0, shiftMs: 0 })
        : (decision as ScheduledDecision);
  }

  /** Whether the slot took units (and so has something to give back). */
  get taken(): boolean {
    return !this.#given && took(this.#call, this.decision);
  }

  /**
   * Gives the slot back, once, where it was taken (the store, or the fallback store): the TAT moves
   * back by its cost, so the next call scheduled moves up by one slot. Sent before it returns, so a
   * call made after it reaches the store after it. A give-back that fails leaves the slot taken
   * until the key expires: the strict side.
   */
  giveBack(): Promise<void> {
    if (!this.taken) return Promise.resolve();
    this.#given = true;
    return giveBack(this.#pipeline, this.#call, this.decision).then(
      () => undefined,
      () => undefined,
    );
  }
}

/**
 * Asks the store for the first slot within `maxWaitMs` of now (-1: take nothing, only read the
 * pause), after pausing the identifier for `pauseMs` when it is above 0. One store call. Rejects
 * with a SluiceError for a call that is not valid (nothing asked).
 */
export async function askSlot(
  pipeline: Pipeline,
  identifier: string,
  cost: number,
  parts: CallParts | undefined,
  maxWaitMs: number,
  pauseMs = 0,
): Promise<Slot> {
  const hold: { call: Call | undefined } = { call: undefined };
  const operands = [String(maxWaitMs), String(pauseMs)];
  const decision = await pipeline.call('schedule', identifier, cost, parts, { operands, hold });
  return new Slot(pipeline, hold.call as Call, decision);
}
