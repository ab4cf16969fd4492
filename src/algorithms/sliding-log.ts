// Sliding window log: the pure twin of sliding-log.lua Exact, one entry per unit used.

import { withFields } from '../copy.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import { describeShare, resolveShare, scaleLimit } from '../share.js';
import type { Operation, Outcome, Policy } from '../types.js';
import { durationMs, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { DEBT_OPTION_KEYS, type DebtOptions, debtOptions } from './debt.js';
import { type OutcomeInto, outcomeOf } from './outcome-into.js';
import { takeUpTo } from './take-up-to.js';
import { callLimit, limitRule, type PolicyBody, windowBody, withLimits } from './variants.js';

/**
 * The largest limit the sliding log accepts. Memory (about 90 bytes per entry once a log passes 128
 * entries) and the work of a request (one sorted-set insert per unit of cost) grow with the limit;
 * at 1000 the costliest request (a cost of 1000 at once) takes about 5 ms of CPU on Redis 7 (2.5 on
 * Valkey 8), half of SLOWLOG's default threshold, and one unit well under a millisecond. Above it,
 * `slidingWindow` or `gcra` decide in O(1) with about 100 bytes per identifier.
 */
export const SLIDING_LOG_MAX_LIMIT = 1000;

/**
 * The state kept per identifier: entry times in ascending order, one per unit used. The twin
 * updates it in place (copying a log of up to 1000 entries per decision would dominate).
 */
export interface SlidingLogState {
  readonly times: number[];
}

/**
 * Decides one request: at most `limit` entries may fall in the window ending now. A charge adds an
 * entry per unit as usage does, up to `limit + maxDebt` entries: the log stays bounded by twice the
 * largest limit (`maxDebt` is at most {@link SLIDING_LOG_MAX_LIMIT}).
 */
export function decideSlidingLog(
  stored: SlidingLogState | undefined,
  clock: number,
  operation: Operation,
  cost: number,
  limit: number,
  windowMs: number,
  maxDebt = limit,
  into?: OutcomeInto,
): Outcome<SlidingLogState> {
  if (operation === 'takeUpTo')
    return takeUpTo(
      (op, units) => decideSlidingLog(stored, clock, op, units, limit, windowMs, maxDebt),
      cost,
    );
  const times = stored === undefined ? [] : stored.times;
  let now = clock;
  const last = times[times.length - 1];
  if (last !== undefined && last > now) now = last;
  const cutoff = now - windowMs;
  let expired = 0;
  while (expired < times.length && (times[expired] as number) <= cutoff) expired++;
  if (expired > 0) times.splice(0, expired);
  let count = times.length;
  let allowed = true;
  let retryAfterMs = 0;
  let changed = expired > 0;
  let fields: number[] | undefined;
  if (operation === 'charge') {
    const taken = Math.min(cost, Math.max(0, limit + maxDebt - count));
    for (let j = 0; j < taken; j++) times.push(now);
    count += taken;
    changed = changed || taken > 0;
    // A request of 1 waits for the entry that would make room to leave (see the denial below).
    const retry = count + 1 > limit ? Math.ceil((times[count - limit] as number) + windowMs - now) : 0;
    fields = [retry, Math.max(0, count - limit), cost - taken];
  } else if (operation === 'refund') {
    if (count > 0) {
      times.length = count > cost ? count - cost : 0;
      count = times.length;
      changed = true;
    }
  } else if (count + cost > limit) {
    allowed = false;
    retryAfterMs = Math.ceil((times[count + cost - limit - 1] as number) + windowMs - now);
  } else if (operation === 'limit') {
    for (let j = 0; j < cost; j++) times.push(now);
    count += cost;
    changed = true;
  }
  const newest = times[count - 1];
  const resetMs = newest === undefined ? 0 : Math.ceil(newest + windowMs - now);
  const outcome = outcomeOf(
    fields === undefined ? into : undefined,
    allowed,
    // A limit lowered for this call (a plan changed mid-window) may be below what the log holds.
    count >= limit ? 0 : limit - count,
    resetMs,
    retryAfterMs,
    count > 0 ? (stored ?? { times }) : undefined,
    changed ? resetMs : -1,
  );
  return fields === undefined ? outcome : withFields(outcome, { fields });
}

/** Options of {@link slidingLog}. */
export interface SlidingLogOptions extends DebtOptions {
  /** Units allowed in any window of `windowMs`; at most {@link SLIDING_LOG_MAX_LIMIT}. */
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
 * Sliding window log: exact at every instant, at the cost of one sorted-set entry per unit used.
 * Suited to small limits where exactness matters (logins, payments).
 *
 * @example
 * const policy = slidingLog({ limit: 5, windowMs: 15 * 60_000 });
 */
export function slidingLog(options: SlidingLogOptions): Policy<SlidingLogState> {
  const raw = optionsObject('slidingLog options', options, true);
  knownKeys('slidingLog', raw, ['limit', 'windowMs', 'share', ...DEBT_OPTION_KEYS]);
  const share = resolveShare('slidingLog.share', raw.share);
  const requested = positiveInteger('slidingLog.limit', raw.limit);
  const limit = scaleLimit('slidingLog', 'limit', requested, share);
  if (limit > SLIDING_LOG_MAX_LIMIT) {
    throw new SluiceError(
      ERROR_CODES.LIMIT_TOO_HIGH,
      `Expected \`slidingLog.limit\` to be at most ${SLIDING_LOG_MAX_LIMIT}, got ${limit} (number): the log keeps one entry per unit. Use slidingWindow() or gcra() for large limits.`,
    );
  }
  const windowMs = durationMs('slidingLog.windowMs', raw.windowMs);
  // The log keeps an entry per unit owed too: its debt is bounded as its limit is.
  const debt = debtOptions('slidingLog', raw, SLIDING_LOG_MAX_LIMIT);
  const body = (units: number): PolicyBody<SlidingLogState> =>
    windowBody('slidingLog', 'sliding-log', units, windowMs, describeShare(share), debt, decideSlidingLog);
  const variant = (perCall: number): PolicyBody<SlidingLogState> => {
    const units = callLimit(perCall, share);
    if (units > SLIDING_LOG_MAX_LIMIT) {
      throw new SluiceError(
        ERROR_CODES.LIMIT_TOO_HIGH,
        `Expected \`limit\` to be at most ${SLIDING_LOG_MAX_LIMIT} for ${limitName(share)}a sliding log, got ${perCall} (number): the log keeps one entry per unit. Use slidingWindow() or gcra() for large limits.`,
      );
    }
    return body(units);
  };
  return withLimits(
    requested,
    body(limit),
    variant,
    limitRule('count', requested, share, debt, SLIDING_LOG_MAX_LIMIT),
  );
}

function limitName(share: number): string {
  return share === 1 ? '' : `its share (${share}) of `;
}
