// Sliding window log: the pure twin of sliding-log.lua Exact, one entry per unit used.
import { ERROR_CODES, SluiceError } from '../errors.js';
import { describeShare, resolveShare, scaleLimit } from '../share.js';
import type { Operation, Outcome, Policy } from '../types.js';
import { durationMs, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { callLimit, limitRule, type PolicyBody, withLimits } from './variants.js';

/**
 * The largest limit the sliding log accepts. Memory (about 90 bytes per entry once a log passes 128
 * entries) and the work of a request (one sorted-set insert per unit of cost) grow with the limit;
 * at 1000 the costliest request stays near a millisecond of Redis time. Above it, `slidingWindow` or
 * `gcra` decide in O(1) with about 100 bytes per identifier.
 */
export const SLIDING_LOG_MAX_LIMIT = 1000;

/**
 * The state kept per identifier: entry times in ascending order, one per unit used. The twin
 * updates it in place (copying a log of up to 1000 entries per decision would dominate).
 */
export interface SlidingLogState {
  readonly times: number[];
}

/** Decides one request: at most `limit` entries may fall in the window ending now. */
export function decideSlidingLog(
  stored: SlidingLogState | undefined,
  clock: number,
  operation: Operation,
  cost: number,
  limit: number,
  windowMs: number,
): Outcome<SlidingLogState> {
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
  if (operation === 'refund') {
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
  return {
    allowed,
    // A limit lowered for this call (a plan changed mid-window) may be below what the log holds.
    remaining: count >= limit ? 0 : limit - count,
    resetMs,
    retryAfterMs,
    state: count > 0 ? (stored ?? { times }) : undefined,
    ttlMs: changed ? resetMs : -1,
  };
}

/** Options of {@link slidingLog}. */
export interface SlidingLogOptions {
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
  knownKeys('slidingLog', raw, ['limit', 'windowMs', 'share']);
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
  const body = (units: number): PolicyBody<SlidingLogState> => ({
    algorithm: 'slidingLog',
    script: 'sliding-log',
    args: [String(units), String(windowMs)],
    limit: units,
    windowMs,
    maxCost: units,
    description: `slidingLog(limit=${units},windowMs=${windowMs}${describeShare(share)})`,
    decide: (state, now, operation, cost) => decideSlidingLog(state, now, operation, cost, units, windowMs),
  });
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
    limitRule('count', requested, share, SLIDING_LOG_MAX_LIMIT),
  );
}

function limitName(share: number): string {
  return share === 1 ? '' : `its share (${share}) of `;
}
