// Sliding window counter: the pure twin of sliding-window.lua (an approximation: the previous window counted as evenly spread).
import { describeShare, resolveShare, scaleLimit } from '../share.js';
import type { Operation, Outcome, Policy } from '../types.js';
import { durationMs, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { DEBT_OPTION_KEYS, type DebtOptions, debtOptions } from './debt.js';
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

/**
 * Decides one request: `previous × (1 − elapsed/window) + current` must leave room for `cost`. A
 * charge counts in the current window as usage does, up to `limit + maxDebt` in the estimate.
 */
export function decideSlidingWindow(
  stored: SlidingWindowState | undefined,
  now: number,
  operation: Operation,
  cost: number,
  limit: number,
  windowMs: number,
  maxDebt = limit,
): Outcome<SlidingWindowState> {
  const index = Math.floor(now / windowMs);
  const elapsed = now - index * windowMs;
  const weight = (windowMs - elapsed) / windowMs;
  let previous = 0;
  let current = 0;
  if (stored !== undefined) {
    if (stored.index === index) {
      previous = stored.previous;
      current = stored.current;
    } else if (stored.index === index - 1) {
      previous = stored.current;
    }
  }
  let allowed = true;
  let retryAfterMs = 0;
  let write = false;
  let fields: number[] | undefined;
  if (operation === 'refund') {
    current = current - cost;
    if (current < 0) current = 0;
    write = true;
  } else if (operation === 'charge') {
    let room = Math.floor(limit + maxDebt - (previous * weight + current) + EPSILON);
    if (room < 0) room = 0;
    const taken = Math.min(cost, room);
    current = current + taken;
    write = taken > 0;
    const estimate = previous * weight + current;
    const retry =
      estimate + 1 > limit + EPSILON ? untilRoom(previous, current, 1, limit, windowMs, elapsed) : 0;
    const debt = Math.ceil(estimate - limit - EPSILON);
    fields = [retry, Math.max(debt, 0), cost - taken];
  } else {
    const estimate = previous * weight + current;
    if (estimate + cost > limit + EPSILON) {
      allowed = false;
      retryAfterMs = untilRoom(previous, current, cost, limit, windowMs, elapsed);
    } else if (operation === 'limit') {
      current = current + cost;
      write = true;
    }
  }
  // Until the end of the next window while there is a current count (on the server's clock the Lua
  // twin then keeps an expiry already set to that moment, with KEEPTTL), else until the end of this one.
  let keepFor = 0;
  if (current > 0) keepFor = Math.ceil(2 * windowMs - elapsed);
  else if (previous > 0) keepFor = Math.ceil(windowMs - elapsed);
  let remaining = Math.floor(limit - (previous * weight + current) + EPSILON);
  if (remaining < 0) remaining = 0;
  const outcome: Outcome<SlidingWindowState> = {
    allowed,
    remaining,
    resetMs: keepFor,
    retryAfterMs,
    state: write && keepFor > 0 ? keep(stored, index, previous, current) : stored,
    ttlMs: write ? keepFor : -1,
  };
  return fields === undefined ? outcome : { ...outcome, fields };
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
