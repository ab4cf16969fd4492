// A built-in twin's second way out: its outcome written into an object its caller reuses, for the
// memory store's usual decision, which would otherwise allocate an Outcome to copy and drop at once.
import type { Operation, Outcome } from './contract.js';

/** An outcome a twin writes its answer into; the caller keeps one and reuses it decision after decision. */
export interface OutcomeInto {
  allowed: boolean;
  remaining: number;
  resetMs: number;
  retryAfterMs: number;
  state: unknown;
  ttlMs: number;
}

/** A new OutcomeInto, to be reused (every field present from the start: one shape for the compiler). */
export function reusableOutcome(): OutcomeInto {
  return {
    allowed: false,
    remaining: 0,
    resetMs: 0,
    retryAfterMs: 0,
    state: undefined,
    ttlMs: -1,
  };
}

/**
 * A built-in policy's twin as `decide`, with its outcome written into `into` (and returned) instead of
 * a new object, unless the operation has fields of its own (a charge). The outcome is the caller's to
 * copy before it decides again.
 */
export type DecideInto<S = unknown> = (
  into: OutcomeInto,
  state: S | undefined,
  now: number,
  operation: Operation,
  cost: number,
) => Outcome<S>;

/** Where a built-in policy keeps its DecideInto: a symbol, so that it is no part of the policy users see. */
export const DECIDE_INTO: unique symbol = Symbol('sluice.decideInto');

/** A policy that may carry a DecideInto (the built-in windows, log, GCRA and token bucket do). */
export interface DecidesInto<S = unknown> {
  readonly [DECIDE_INTO]?: DecideInto<S>;
}

/**
 * A twin's outcome: written into `into` when there is one, else a new object with the same fields
 * (what `Policy.decide` returns).
 */
export function outcomeOf<S>(
  into: OutcomeInto | undefined,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
  state: S | undefined,
  ttlMs: number,
): Outcome<S> {
  if (into === undefined) return { allowed, remaining, resetMs, retryAfterMs, state, ttlMs };
  into.allowed = allowed;
  into.remaining = remaining;
  into.resetMs = resetMs;
  into.retryAfterMs = retryAfterMs;
  into.state = state;
  into.ttlMs = ttlMs;
  return into as Outcome<S>;
}
