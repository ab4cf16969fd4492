// GCRA's state and the parts of its rule every operation shares: the TAT, the pause an upstream asked for, units free now.

import { withFields } from '../copy.js';
import type { Outcome } from '../types.js';
import { type OutcomeInto, outcomeOf } from './outcome-into.js';

/**
 * Slack for comparisons of times, in ms; the Lua twin uses the same value. Times near 1.7e12 ms
 * carry float steps of about 2.4e-4 ms: one microsecond covers them.
 */
export const EPSILON_MS = 1e-3;

/**
 * A pause an upstream asked for (throttle() learnt it from a 429 or 503): when it ends (whole ms, in
 * the clock's time) and how far it moved the slots already handed out (whole ms).
 */
export interface GcraPause {
  readonly pausedUntil: number;
  readonly shiftMs: number;
}

/**
 * A GCRA state while a pause holds: the TAT and the pause. Redis keeps it in the same key, as
 * `"<tat> <pausedUntil> <shiftMs>"`, so the script that decides reads it without another command.
 */
export interface GcraPaused extends GcraPause {
  readonly tat: number;
}

/** GCRA's and the token bucket's state: the theoretical arrival time (TAT) in ms, with its pause while one holds. */
export type GcraState = number | GcraPaused;

/** The TAT a state holds. */
export function tatOf(state: GcraState | undefined): number | undefined {
  return typeof state === 'object' ? state.tat : state;
}

/** The pause a state holds, if it has not ended by `now`. */
export function activePause(state: GcraState | undefined, now: number): GcraPaused | undefined {
  return typeof state === 'object' && state.pausedUntil > now ? state : undefined;
}

/** The state to keep: the TAT, with the pause while it holds. */
export function keptState(tat: number, pause: GcraPause | undefined): GcraState {
  return pause === undefined ? tat : { tat, pausedUntil: pause.pausedUntil, shiftMs: pause.shiftMs };
}

/**
 * The lowest TAT while a pause holds: the first unit after the pause comes when it ends, and the
 * next ones one interval apart. A full burst at the end of a pause would meet an upstream that has
 * just said it is overwhelmed.
 */
export function pauseFloor(pausedUntil: number, intervalMs: number, toleranceMs: number): number {
  return pausedUntil + toleranceMs - intervalMs;
}

/**
 * Whole units that fit now: the largest n with tat + n × interval − now ≤ tolerance, by the very
 * comparison a request of cost n meets, so `remaining` never disagrees with the next decision.
 */
export function unitsAvailable(tat: number, now: number, intervalMs: number, toleranceMs: number): number {
  let n = Math.floor((toleranceMs - (tat - now)) / intervalMs);
  if (n < 0) n = 0;
  while (tat + (n + 1) * intervalMs - now <= toleranceMs + EPSILON_MS) n++;
  while (n > 0 && tat + n * intervalMs - now > toleranceMs + EPSILON_MS) n--;
  return n;
}

/**
 * What a GCRA decision answers and keeps, once its new TAT is known: the units free now, the reset,
 * and the state (`write`: whether the decision changed it; one that leaves nothing owed deletes, a
 * read keeps what was there). The Lua twin stores a TAT of whole microseconds as an integer (minus
 * the count of µs, or on the server's clock minus 2^52 plus it, the key then expiring at the next
 * whole second) and any other as a decimal; all read back exactly, so the form never changes a
 * decision.
 */
export function gcraOutcome(
  stored: GcraState | undefined,
  now: number,
  tat: number,
  pause: GcraPause | undefined,
  write: boolean,
  allowed: boolean,
  retryAfterMs: number,
  intervalMs: number,
  toleranceMs: number,
  fields?: readonly number[],
  into?: OutcomeInto,
): Outcome<GcraState> {
  const keep = tat > now;
  const outcome = outcomeOf(
    fields === undefined ? into : undefined,
    allowed,
    unitsAvailable(tat, now, intervalMs, toleranceMs),
    Math.ceil(tat - now),
    retryAfterMs,
    write && keep ? keptState(tat, pause) : stored,
    write ? (keep ? Math.ceil(tat - now) : 0) : -1,
  );
  return fields === undefined ? outcome : withFields(outcome, { fields });
}
