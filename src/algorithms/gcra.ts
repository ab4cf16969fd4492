// GCRA and the token bucket: the pure twin of gcra.lua. One number of state, the theoretical arrival time
// (with the pause an upstream asked for, while one holds: see gcra-state.ts).
import { describeShare, resolveShare, scaleBurst } from '../share.js';
import type { Operation, Outcome, Policy } from '../types.js';
import { durationMs, knownKeys, optionsObject, positiveInteger, positiveNumber } from '../validate.js';
import { DEBT_OPTION_KEYS, type DebtOptions, debtOptions, type ResolvedDebt } from './debt.js';
import { decideSchedule } from './gcra-schedule.js';
import {
  activePause,
  EPSILON_MS,
  type GcraState,
  gcraOutcome,
  pauseFloor,
  tatOf,
  unitsAvailable,
} from './gcra-state.js';
import { DECIDE_INTO, type DecidesInto, type OutcomeInto } from './outcome-into.js';
import { takeUpTo } from './take-up-to.js';
import { limitRule, type PolicyBody, scaledAtLeastOne, withLimits } from './variants.js';

export type { GcraPause, GcraPaused, GcraState } from './gcra-state.js';

/**
 * A charge's fields: the retry for a cost of 1, the units owed past the tolerance (the fewest whose
 * return brings TAT back within it), and the units cut off.
 */
function chargeFields(
  tat: number,
  now: number,
  intervalMs: number,
  toleranceMs: number,
  cut: number,
): number[] {
  const next = tat + intervalMs;
  const retry = next - now > toleranceMs + EPSILON_MS ? Math.ceil(next - toleranceMs - now - EPSILON_MS) : 0;
  const debt = Math.ceil((tat - now - toleranceMs - EPSILON_MS) / intervalMs);
  return [retry, Math.max(debt, 0), cut];
}

/**
 * The rule both policies share: each unit of cost moves the theoretical arrival time (TAT) one
 * emission interval later, and a request is allowed while TAT stays within `toleranceMs` of now. A
 * charge moves it on past the tolerance, by at most `maxDebt` units more (tokens below zero).
 */
export function decideGcra(
  stored: GcraState | undefined,
  now: number,
  operation: Operation,
  cost: number,
  intervalMs: number,
  toleranceMs: number,
  operands?: readonly string[],
  maxDebt = Math.round(toleranceMs / intervalMs),
  into?: OutcomeInto,
): Outcome<GcraState> {
  if (operation === 'takeUpTo') {
    const decide = (op: Operation, units: number) =>
      decideGcra(stored, now, op, units, intervalMs, toleranceMs, operands, maxDebt);
    return takeUpTo(decide, cost);
  }
  if (operation === 'schedule') return decideSchedule(stored, now, cost, intervalMs, toleranceMs, operands);
  const pause = activePause(stored, now);
  const storedTat = tatOf(stored);
  let tat = storedTat === undefined || storedTat < now ? now : storedTat;
  let allowed = true;
  let retryAfterMs = 0;
  let write = false;
  let fields: number[] | undefined;
  if (operation === 'charge') {
    const room = unitsAvailable(tat, now, intervalMs, toleranceMs + maxDebt * intervalMs);
    const taken = Math.min(cost, room);
    if (taken > 0) {
      tat = tat + taken * intervalMs;
      write = true;
    }
    fields = chargeFields(tat, now, intervalMs, toleranceMs, cost - taken);
  } else if (operation === 'refund') {
    tat = tat - cost * intervalMs;
    if (tat < now) tat = now;
    // A pause keeps its floor: giving back never lets a unit in before the pause ends.
    if (pause !== undefined) {
      const floor = pauseFloor(pause.pausedUntil, intervalMs, toleranceMs);
      if (tat < floor) tat = floor;
    }
    write = true;
  } else {
    const next = tat + cost * intervalMs;
    if (next - now > toleranceMs + EPSILON_MS) {
      allowed = false;
      retryAfterMs = Math.ceil(next - toleranceMs - now - EPSILON_MS);
    } else if (operation === 'limit') {
      tat = next;
      write = true;
    }
  }
  return gcraOutcome(
    stored,
    now,
    tat,
    pause,
    write,
    allowed,
    retryAfterMs,
    intervalMs,
    toleranceMs,
    fields,
    into,
  );
}

/** Options of {@link gcra}. */
export interface GcraOptions extends DebtOptions {
  /** Requests allowed per `periodMs` on average. */
  readonly limit: number;
  /** The period `limit` is counted over, in ms. */
  readonly periodMs: number;
  /**
   * The most requests allowed at once, after a quiet spell.
   * @default limit
   */
  readonly burst?: number;
  /**
   * This region's part of a global budget, from 0 (excluded) to 1: the rate is scaled exactly and
   * the burst rounded down, to at least 1 (see docs/tags-and-regions.md).
   * @default 1
   */
  readonly share?: number;
}

/**
 * The generic cell rate algorithm: `limit` requests per `periodMs`, evenly spaced, with bursts of
 * up to `burst`. One number per identifier; exact; smooth; O(1).
 *
 * @example
 * const policy = gcra({ limit: 100, periodMs: 60_000, burst: 20 });
 */
export function gcra(options: GcraOptions): Policy<GcraState> {
  const raw = optionsObject('gcra options', options, true);
  knownKeys('gcra', raw, ['limit', 'periodMs', 'burst', 'share', ...DEBT_OPTION_KEYS]);
  const limit = positiveInteger('gcra.limit', raw.limit);
  const periodMs = durationMs('gcra.periodMs', raw.periodMs);
  const burst = raw.burst === undefined ? limit : positiveInteger('gcra.burst', raw.burst);
  const share = resolveShare('gcra.share', raw.share);
  const debt = debtOptions('gcra', raw);
  // The rate needs no rounding: the emission interval is a fraction of a millisecond as readily as a whole one.
  const body = (rate: number, units: number): PolicyBody<GcraState> =>
    gcraPolicy(
      'gcra',
      `gcra(limit=${rate},periodMs=${periodMs},burst=${units}${describeShare(share)}${debt.described})`,
      periodMs / (rate * share),
      scaleBurst(units, share),
      debt,
    );
  // A call's limit is its rate; the burst grows or shrinks with it (a plan twice as large bursts twice as far).
  return withLimits(
    limit,
    body(limit, burst),
    (rate) => body(rate, scaledAtLeastOne(burst, rate / limit)),
    limitRule('rate', limit, share, debt, periodMs, burst),
  );
}

/** Options of {@link tokenBucket}. */
export interface TokenBucketOptions extends DebtOptions {
  /** Tokens the bucket holds when full: the largest burst. */
  readonly capacity: number;
  /** Tokens added per second, fractions allowed (0.5 is one token every two seconds). */
  readonly refillPerSecond: number;
  /**
   * This region's part of a global budget, from 0 (excluded) to 1: the refill rate is scaled
   * exactly and the capacity rounded down, to at least 1 (see docs/tags-and-regions.md).
   * @default 1
   */
  readonly share?: number;
}

/**
 * The token bucket: up to `capacity` at once, refilled at `refillPerSecond`. Fractional tokens are
 * kept. Stored as the moment the bucket will be full again (one number), which is the GCRA form of
 * the same rule: decisions equal a bucket that stores tokens and a timestamp.
 *
 * @example
 * const policy = tokenBucket({ capacity: 100, refillPerSecond: 10 });
 */
export function tokenBucket(options: TokenBucketOptions): Policy<GcraState> {
  const raw = optionsObject('tokenBucket options', options, true);
  knownKeys('tokenBucket', raw, ['capacity', 'refillPerSecond', 'share', ...DEBT_OPTION_KEYS]);
  const capacity = positiveInteger('tokenBucket.capacity', raw.capacity);
  const refillPerSecond = positiveNumber('tokenBucket.refillPerSecond', raw.refillPerSecond);
  const share = resolveShare('tokenBucket.share', raw.share);
  const debt = debtOptions('tokenBucket', raw);
  const body = (size: number, refill: number): PolicyBody<GcraState> => {
    const intervalMs = 1000 / (refill * share);
    const scaledCapacity = scaleBurst(size, share);
    return gcraPolicy(
      'tokenBucket',
      `tokenBucket(capacity=${size},refillPerSecond=${refill}${describeShare(share)}${debt.described})`,
      intervalMs,
      scaledCapacity,
      debt,
    );
  };
  // A call's limit is the bucket's capacity; the refill rate scales with it, so the time to refill
  // an empty bucket stays the same.
  return withLimits(
    capacity,
    body(capacity, refillPerSecond),
    (size) => body(size, (refillPerSecond * size) / capacity),
    limitRule('capacity', capacity, share, debt, refillPerSecond),
  );
}

/**
 * Both policies grant `burst` units per `burst` emission intervals: that is the rate headers state
 * (`q=burst;w=burst × interval`). The period the user wrote would claim `burst` per period, far
 * too little whenever the burst is smaller than the limit (a client pacing itself by it slows down).
 */
function gcraPolicy(
  algorithm: string,
  description: string,
  intervalMs: number,
  burst: number,
  debt: ResolvedDebt,
): PolicyBody<GcraState> {
  const toleranceMs = burst * intervalMs;
  const maxDebt = debt.maxDebt ?? burst;
  const body: PolicyBody<GcraState> & DecidesInto<GcraState> = {
    algorithm,
    rule: { name: 'gcra', parameters: [intervalMs, toleranceMs] },
    limit: burst,
    // The slack absorbs float steps: 3 × (1000 / 3) must stay one second, not become 1001 ms.
    windowMs: Math.ceil(toleranceMs - EPSILON_MS),
    maxCost: burst,
    maxDebt,
    unit: debt.unit,
    description,
    schedules: true,
    decide: (state, now, operation, cost, operands) =>
      decideGcra(state, now, operation, cost, intervalMs, toleranceMs, operands, maxDebt),
    [DECIDE_INTO]: (into, state, now, operation, cost) =>
      decideGcra(state, now, operation, cost, intervalMs, toleranceMs, undefined, maxDebt, into),
  };
  return body;
}
