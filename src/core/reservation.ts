// A cost known after the response: an estimate reserved now, settled with the actual cost once, by a value the caller holds.
import { randomInt } from 'node:crypto';
import { describeValue, ERROR_CODES, SluiceError } from '../errors.js';
import { refusal } from '../operations.js';
import type { Decision, Reservation } from '../types.js';
import { Call } from './call.js';
import { adjust } from './follow-up.js';
import type { CallParts, Pipeline } from './pipeline.js';
import { took } from './together.js';

/**
 * Settles what one call took with its actual cost: the difference given back (`refund`) when lower,
 * charged when higher (into debt, up to `maxDebt`), where the call took it. The answer to the
 * adjustment; `undefined` when there was nothing to adjust, or the fallback store made it. Rejects
 * when a charge is not recorded (the store's error).
 */
export function settleCall(
  pipeline: Pipeline,
  call: Call,
  decision: Decision,
  actual: number,
  settleId?: string,
): Promise<Decision | undefined> {
  const difference = actual - call.cost;
  if (difference === 0) return Promise.resolve(undefined);
  return difference < 0
    ? adjust(pipeline, call, decision, 'refund', -difference, settleId)
    : adjust(pipeline, call, decision, 'charge', difference, settleId);
}

/**
 * A new reservation's settle id: a random whole number (decimal, below 2^48, never the NO_SETTLE
 * of 0), which the store remembers once the settle is applied, so that sending it again (a retry
 * whose first reply was lost) changes nothing.
 */
export function newSettleId(): string {
  return String(randomInt(1, 2 ** 48));
}

/** An actual cost: a whole number of at least 0 (a reservation that used nothing gives all back). */
export function checkActual(actual: unknown): SluiceError | undefined {
  if (typeof actual === 'number' && Number.isSafeInteger(actual) && actual >= 0) return undefined;
  return new SluiceError(
    ERROR_CODES.INVALID_COST,
    `Expected \`actual\` to be a whole number of at least 0, got ${describeValue(actual)}.`,
  );
}

/**
 * What `reserve` returns: the call that took the estimate and its decision. Nothing else of it lives
 * in the process; a second settle is refused, a settle whose charge the store failed may be retried.
 */
export class LimiterReservation implements Reservation {
  readonly decision: Decision;
  readonly #pipeline: Pipeline;
  readonly #call: Call;
  /** `open` until a settle is under way (`settling`), then `settled` once it was recorded. */
  #state: 'open' | 'settling' | 'settled' = 'open';
  /** Sent with the settle, and with each retry of it: the store applies it once. */
  readonly #settleId = newSettleId();

  constructor(pipeline: Pipeline, call: Call, decision: Decision) {
    this.#pipeline = pipeline;
    this.#call = call;
    this.decision = decision;
  }

  get identifier(): string {
    return this.#call.identifier;
  }

  get cost(): number {
    return this.#call.cost;
  }

  get settled(): boolean {
    return this.#state === 'settled';
  }

  async settle(actual: number): Promise<Decision> {
    const invalid = checkActual(actual);
    if (invalid !== undefined) throw invalid;
    if (this.#state !== 'open') {
      throw new SluiceError(
        ERROR_CODES.ALREADY_SETTLED,
        `Expected a reservation to be settled once: this one (${this.cost} for ${JSON.stringify(this.identifier)}) was settled already, and \`settle(${actual})\` recorded nothing.`,
      );
    }
    // A reservation that took nothing (refused, or answered without the store) settles to nothing.
    if (!took(this.#call, this.decision)) {
      this.#state = 'settled';
      return this.decision;
    }
    this.#state = 'settling';
    try {
      const answer = await settleCall(this.#pipeline, this.#call, this.decision, actual, this.#settleId);
      this.#state = 'settled';
      return answer ?? this.decision;
    } catch (error) {
      // The charge was not recorded (or, after a timeout, may have been: a retry carries the same
      // settle id, which the store applies once): the caller may settle again.
      this.#state = 'open';
      throw error;
    }
  }
}

/**
 * Settles a reservation of `reserved` taken elsewhere (by the decision service, whose caller holds
 * it) with its actual cost: the difference given back or charged, applied once for `settleId`
 * however often and by whichever process it is sent. `undefined` when there was nothing to adjust.
 */
export function settleReserved(
  pipeline: Pipeline,
  identifier: string,
  reserved: number,
  actual: number,
  settleId: string | undefined,
): Promise<Decision | undefined> {
  const policy = pipeline.check('limit', identifier, reserved);
  if (policy instanceof SluiceError) return Promise.reject(policy);
  const call = new Call(pipeline.name, policy, 'limit', identifier, reserved, undefined);
  const taken: Decision = { allowed: true, limit: policy.limit, remaining: 0, resetMs: 0, retryAfterMs: 0 };
  return settleCall(pipeline, call, taken, actual, settleId);
}

/** Reserves `cost` for an identifier: a `limit` call, kept with its decision for settling later. */
export async function reserve(
  pipeline: Pipeline,
  identifier: string,
  cost: number,
  parts: CallParts | undefined,
): Promise<LimiterReservation> {
  const refused = refusal('reserve', pipeline.policy);
  if (refused !== undefined) throw refused;
  const hold: { call: Call | undefined } = { call: undefined };
  const decision = await pipeline.call('limit', identifier, cost, parts, { hold });
  return new LimiterReservation(pipeline, hold.call as Call, decision);
}
