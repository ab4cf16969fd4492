// Sliding window counter: the pure twin of sliding-window.lua (an approximation: the previous window counted as evenly spread).

import { withFields } from '../copy.js';
import { describeShare, resolveShare, scaleLimit } from '../share.js';
import type { Operation, Outcome, Policy } from '../types.js';
import { durationMs, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { DEBT_OPTION_KEYS, type DebtOptions, debtOptions } from './debt.js';
import { type OutcomeInto, outcomeOf } from './outcome-into.js';
import { takeUpTo } from './take-up-to.js';
import { callLimit, limitRule, type PolicyBody, windowBody, withLimits } from './variants.js';

/** Slack for float comparisons; the Lua twin uses the same value. */
const EPSILON = 1e-6;

/** The state kept per identifier: the current window's index and the two counts. */
export interface SlidingWindowState {
  index: number;
  previous: number;
  current: number;
}

/** The state to keep, written into the previous one when there is one (see fixed-window.ts). */
function keep(
  stored: SlidingWindowState | undefined,
  index: number,
  previous: number,
  current: number,
): SlidingWindowState {
  if (stored === undefined) return { index, previous, current };
  stored.index = index;
  stored.previous = previous;
  stored.current = current;
  return stored;
}

/** Milliseconds until `previous × weight + current` leaves room for `cost` (it does not now). */
function untilRoom(
  previous: number,
  current: number,
  cost: number,
  limit: number,
  windowMs: number,
  elapsed: number,
): number {
  if (current + cost <= limit) {
    return Math.ceil(windowMs - elapsed - ((limit - current - cost) * windowMs) / previous);
  }
  let into = windowMs - ((limit - cost) * windowMs) / current;
  if (into < 0) into = 0;
  return Math.ceil(windowMs - elapsed + into);
}

/** The estimate: the previous window's count weighted by its overlap with the sliding window, plus the current one. */
function weighted(previous: number, weight: number, current: number): number {
  return previous * weight + current;
}

/** The previous window's count seen from window `index`: kept beside the current one, or a window old. */
function previousCount(stored: SlidingWindowState | undefined, index: number): number {
  if (stored === undefined) return 0;
  if (stored.index === index) return stored.previous;
  return stored.index === index - 1 ? stored.current : 0;
}

/** The current window's count: 0 unless the state is of window `index`. */
function currentCount(stored: SlidingWindowState | undefined, index: number): number {
  return stored !== undefined && stored.index === index ? stored.current : 0;
}

/** Whole units the estimate leaves under `limit`, never fewer than 0. */
function remainingUnits(estimate: number, limit: number): number {
  let remaining = Math.floor(limit - estimate + EPSILON);
  if (remaining < 0) remaining = 0;
  return remaining;
}

/** Units a charge counts: `cost`, cut to what keeps the estimate within `limit + maxDebt`. */
function chargeTaken(estimate: number, cost: number, limit: number, maxDebt: number): number {
  let room = Math.floor(limit + maxDebt - estimate + EPSILON);
  if (room < 0) room = 0;
  return Math.min(cost, room);
}

/** A charge's fields, from the estimate once counted: retryAfterMs for a cost of 1, the debt, the part cut off. */
function chargeFields(
  previous: number,
  current: number,
  estimate: number,
  cut: number,
  limit: number,
  windowMs: number,
  elapsed: number,
): number[] {
  const retry =
    estimate + 1 > limit + EPSILON ? untilRoom(previous, current, 1, limit, windowMs, elapsed) : 0;
  const debt = Math.ceil(estimate - limit - EPSILON);
  return [retry, Math.max(debt, 0), cut];
}

/**
 * How long the state matters: until the end of the next window while there is a current count (on
 * the server's clock the Lua twin then keeps an expiry already set to that moment, with KEEPTTL),
 * else until the end of this one.
 */
function keepForMs(previous: number, current: number, windowMs: number, elapsed: number): number {
  if (current > 0) return Math.ceil(2 * windowMs - elapsed);
  if (previous > 0) return Math.ceil(windowMs - elapsed);
  return 0;
}

/**
 * Decides one request: `previous × (1 − elapsed/window) + current` must leave room for `cost`. A
 * charge counts in the current window as usage does, up to `limit + maxDebt` in the estimate.
 * Its steps are small functions that allocate nothing: this runs on the in-process hot path.
 */
export function decideSlidingWindow(
  stored: SlidingWindowState | undefined,
  now: number,
  operation: Operation,
  cost: number,
  limit: number,
  windowMs: number,
  maxDebt = limit,
  into?: OutcomeInto,
): Outcome<SlidingWindowState> {
  if (operation === 'takeUpTo')
    return takeUpTo(
      (op, units) => decideSlidingWindow(stored, now, op, units, limit, windowMs, maxDebt),
      cost,
    );
  const index = Math.floor(now / windowMs);
  const elapsed = now - index * windowMs;
  const weight = (windowMs - elapsed) / windowMs;
  const previous = previousCount(stored, index);
  let current = currentCount(stored, index);
  let allowed = true;
  let retryAfterMs = 0;
  let write = false;
  let fields: number[] | undefined;
  if (operation === 'refund') {
    current = current - cost;
    if (current < 0) current = 0;
    write = true;
  } else if (operation === 'charge') {
    const taken = chargeTaken(weighted(previous, weight, current), cost, limit, maxDebt);
    current = current + taken;
    write = taken > 0;
    const estimate = weighted(previous, weight, current);
    fields = chargeFields(previous, current, estimate, cost - taken, limit, windowMs, elapsed);
  } else if (weighted(previous, weight, current) + cost > limit + EPSILON) {
    allowed = false;
    retryAfterMs = untilRoom(previous, current, cost, limit, windowMs, elapsed);
  } else if (operation === 'limit') {
    current = current + cost;
    write = true;
  }
  const keepFor = keepForMs(previous, current, windowMs, elapsed);
  const outcome = outcomeOf(
    fields === undefined ? into : undefined,
    allowed,
    remainingUnits(weighted(previous, weight, current), limit),
    keepFor,
    retryAfterMs,
    write && keepFor > 0 ? keep(stored, index, previous, current) : stored,
    write ? keepFor : -1,
  );
  return fields === undefined ? outcome : withFields(outcome, { fields });
}

/** Options of {@link slidingWindow}. */
export interface SlidingWindowOptions extends DebtOptions {
  /** Units allowed in any window of `windowMs` (approximately: see docs/algorithms.md). */
  readonly limit: number;
  /** Window length in ms. */
  readonly windowMs: number;
  /**
   * This region's part of a global budget, from 0 (excluded) to 1: the limit is scaled by it and
   * rounded down (see docs/tags-and-regions.md).
   * @default 1
   */
  readonly share?: number;
}

/**
 * Sliding window counter: two counts per identifier, the previous window weighted by how much of it
 * still overlaps. Smooth at window boundaries and O(1) in memory, at the price of assuming the
 * previous window's requests were evenly spread.
 *
 * @example
 * const policy = slidingWindow({ limit: 100, windowMs: 60_000 });
 */
export function slidingWindow(options: SlidingWindowOptions): Policy<SlidingWindowState> {
  const raw = optionsObject('slidingWindow options', options, true);
  knownKeys('slidingWindow', raw, ['limit', 'windowMs', 'share', ...DEBT_OPTION_KEYS]);
  const share = resolveShare('slidingWindow.share', raw.share);
  const requested = positiveInteger('slidingWindow.limit', raw.limit);
  const limit = scaleLimit('slidingWindow', 'limit', requested, share);
  const windowMs = durationMs('slidingWindow.windowMs', raw.windowMs);
  const debt = debtOptions('slidingWindow', raw);
  const body = (units: number): PolicyBody<SlidingWindowState> =>
    windowBody(
      'slidingWindow',
      'sliding-window',
      units,
      windowMs,
      describeShare(share),
      debt,
      decideSlidingWindow,
    );
  return withLimits(
    requested,
    body(limit),
    (perCall) => body(callLimit(perCall, share)),
    limitRule('count', requested, share, debt),
  );
}
