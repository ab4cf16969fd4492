// A request scheduled in a future slot on GCRA and the token bucket (`schedule`): the twin of gcra.lua's gcra_schedule.
import type { Outcome } from '../types.js';
import {
  activePause,
  EPSILON_MS,
  type GcraPause,
  type GcraState,
  gcraOutcome,
  pauseFloor,
  tatOf,
} from './gcra-state.js';

/**
 * Schedules `cost` units in the first slot where they fit: the TAT moves on at once, and the result
 * says how long until the slot (`fields[0]`, whole ms rounded up, 0 for now). A slot further away
 * than the first operand (the longest wait, in ms; -1 only reads) takes nothing, and the refusal's
 * `retryAfterMs` is how long until it would come within reach.
 *
 * The second operand (ms; 0 for none) is a pause an upstream asked for: no slot before it ends, the
 * first after it one interval from the next (no burst), and every slot already handed out moved on
 * by as much as the pause adds (`fields[2]`), so that whoever holds one and hears of the pause
 * (`fields[1]`, what is left of it) moves it too and the slots keep their spacing.
 */
export function decideSchedule(
  stored: GcraState | undefined,
  now: number,
  cost: number,
  intervalMs: number,
  toleranceMs: number,
  operands: readonly string[] | undefined,
): Outcome<GcraState> {
  const maxWaitMs = Number(operands?.[0] ?? 0);
  const pauseMs = Number(operands?.[1] ?? 0);
  let pause: GcraPause | undefined = activePause(stored, now);
  const storedTat = tatOf(stored);
  let tat = storedTat === undefined || storedTat < now ? now : storedTat;
  let write = false;
  if (pauseMs > 0) {
    const paused = pausedFrom(pause, now, pauseMs);
    if (paused !== undefined) {
      tat += paused.shiftMs;
      const floor = pauseFloor(paused.pausedUntil, intervalMs, toleranceMs);
      if (tat < floor) tat = floor;
      pause = paused;
      write = true;
    }
  }
  const next = tat + cost * intervalMs;
  const wait = next - toleranceMs - now;
  const waitMs = wait <= EPSILON_MS ? 0 : Math.ceil(wait - EPSILON_MS);
  const allowed = waitMs <= maxWaitMs;
  if (allowed) {
    tat = next;
    write = true;
  }
  const fields = [
    waitMs,
    pause === undefined ? 0 : Math.ceil(pause.pausedUntil - now),
    pause === undefined ? 0 : pause.shiftMs,
  ];
  const retryAfterMs = allowed ? 0 : waitMs - maxWaitMs;
  return gcraOutcome(stored, now, tat, pause, write, allowed, retryAfterMs, intervalMs, toleranceMs, fields);
}

/**
 * The pause a request for `pauseMs` makes, or `undefined` when the pause already holding lasts as
 * long: it ends on a whole ms, and its shift is what it adds to the one holding (or to now).
 */
function pausedFrom(pause: GcraPause | undefined, now: number, pauseMs: number): GcraPause | undefined {
  const pausedUntil = Math.ceil(now + pauseMs);
  if (pause !== undefined && pausedUntil <= pause.pausedUntil) return undefined;
  const shiftMs = pausedUntil - (pause === undefined ? Math.floor(now) : pause.pausedUntil);
  return { pausedUntil, shiftMs };
}
