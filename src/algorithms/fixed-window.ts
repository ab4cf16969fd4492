// Fixed window: the pure twin of fixed-window.lua. Windows are aligned to the clock (a minute starts at :00).

import { withFields } from '../copy.js';
import { describeShare, resolveShare, scaleLimit } from '../share.js';
import type { Operation, Outcome, Policy } from '../types.js';
import { durationMs, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { DEBT_OPTION_KEYS, type DebtOptions, debtOptions } from './debt.js';
import { type OutcomeInto, outcomeOf } from './outcome-into.js';
import { takeUpTo } from './take-up-to.js';
import { callLimit, limitRule, type PolicyBody, windowBody, withLimits } from './variants.js';

/**
 * The state kept per identifier: which window, and how many units it has used. As on Redis (see
 * fixed-window.lua), one number, index × 2^21 + count, whenever both fit in it exactly (an index
 * below 2^32, which is any window of a second or more until 2106, and a limit and count below 2^21): the memory
 * store keeps such a number unboxed, 8 bytes instead of an object. Otherwise an object, which the
 * twin updates in place.
 */
export type FixedWindowState = number | { index: number; count: number };

/** Counts stay below it; see FixedWindowState. */
const SPAN = 2 ** 21;
const INDICES = 2 ** 32;

/** The state to keep: the packed number when it fits, else written into the previous object (or a new one). */
function keep(
  stored: FixedWindowState | undefined,
  index: number,
  count: number,
  limit: number,
): FixedWindowState {
  // The count too, not only the limit: a limit lowered for one call may meet a larger count (refunds).
  if (index < INDICES && limit < SPAN && count < SPAN) return index * SPAN + count;
  if (stored === undefined || typeof stored === 'number') return { index, count };
  stored.index = index;
  stored.count = count;
  return stored;
}

/**
 * Decides one request against a fixed window of `windowMs` holding `limit` units. A charge counts
 * in the window as usage does, up to `limit + maxDebt`: the debt ends with the window.
 */
export function decideFixedWindow(
  stored: FixedWindowState | undefined,
  now: number,
  operation: Operation,
  cost: number,
  limit: number,
  windowMs: number,
  maxDebt = limit,
  into?: OutcomeInto,
): Outcome<FixedWindowState> {
  if (operation === 'takeUpTo')
    return takeUpTo((op, units) => decideFixedWindow(stored, now, op, units, limit, windowMs, maxDebt), cost);
  const index = Math.floor(now / windowMs);
  const untilEnd = Math.ceil((index + 1) * windowMs - now);
  let count = 0;
  if (typeof stored === 'number') {
    // The packed form: SPAN is a power of two, so the division is exact.
    const storedIndex = Math.floor(stored / SPAN);
    if (storedIndex === index) count = stored - storedIndex * SPAN;
  } else if (stored !== undefined && stored.index === index) {
    count = stored.count;
  }
  let allowed = true;
  let retryAfterMs = 0;
  let ttlMs = -1;
  let fields: number[] | undefined;
  if (operation === 'refund') {
    count = count - cost;
    if (count < 0) count = 0;
    ttlMs = count > 0 ? untilEnd : 0;
  } else if (operation === 'charge') {
    const room = Math.max(0, limit + maxDebt - count);
    const taken = Math.min(cost, room);
    if (taken > 0) {
      count = count + taken;
      ttlMs = untilEnd;
    }
    // The retry for a cost of 1, the debt, the units cut off (see fixed-window.lua).
    fields = [count + 1 > limit ? untilEnd : 0, Math.max(0, count - limit), cost - taken];
  } else if (count + cost > limit) {
    allowed = false;
    retryAfterMs = untilEnd;
  } else if (operation === 'limit') {
    count = count + cost;
    // Always the window's end: on the server's clock the Lua twin keeps the expiry of a key that
    // already holds this window (INCRBY, SET ... KEEPTTL), which is the same moment.
    ttlMs = untilEnd;
  }
  const outcome = outcomeOf(
    fields === undefined ? into : undefined,
    allowed,
    // A limit lowered for this call (a plan changed mid-window) may be below the count.
    count >= limit ? 0 : limit - count,
    count > 0 ? untilEnd : 0,
    retryAfterMs,
    ttlMs > 0 ? keep(stored, index, count, limit) : stored,
    ttlMs,
  );
  return fields === undefined ? outcome : withFields(outcome, { fields });
}

/** Options of {@link fixedWindow}. */
export interface FixedWindowOptions extends DebtOptions {
  /** Units allowed per window. */
  readonly limit: number;
  /** Window length in ms; windows start at multiples of it (minutes start at :00). */
  readonly windowMs: number;
  /**
   * This region's part of a global budget, from 0 (excluded) to 1: the limit is scaled by it and
   * rounded down (see docs/tags-and-regions.md).
   * @default 1
   */
  readonly share?: number;
}

/**
 * Fixed window: at most `limit` units per clock-aligned window. The cheapest policy (one small
 * value per identifier), but up to twice the limit can pass around a window boundary.
 *
 * @example
 * const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
 */
export function fixedWindow(options: FixedWindowOptions): Policy<FixedWindowState> {
  const raw = optionsObject('fixedWindow options', options, true);
  knownKeys('fixedWindow', raw, ['limit', 'windowMs', 'share', ...DEBT_OPTION_KEYS]);
  const share = resolveShare('fixedWindow.share', raw.share);
  const requested = positiveInteger('fixedWindow.limit', raw.limit);
  const limit = scaleLimit('fixedWindow', 'limit', requested, share);
  const windowMs = durationMs('fixedWindow.windowMs', raw.windowMs);
  const debt = debtOptions('fixedWindow', raw);
  const body = (units: number): PolicyBody<FixedWindowState> =>
    windowBody('fixedWindow', 'fixed-window', units, windowMs, describeShare(share), debt, decideFixedWindow);
  return withLimits(
    requested,
    body(limit),
    (perCall) => body(callLimit(perCall, share)),
    limitRule('count', requested, share, debt),
  );
}
