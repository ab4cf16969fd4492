// GCRA and the token bucket: the pure twin of gcra.lua. One number of state, the theoretical arrival time.
import { describeShare, resolveShare, scaleBurst } from '../share.js';
import type { Operation, Outcome, Policy } from '../types.js';
import { durationMs, knownKeys, optionsObject, positiveInteger, positiveNumber } from '../validate.js';
import { DEBT_OPTION_KEYS, type DebtOptions, debtOptions, type ResolvedDebt } from './debt.js';
import { limitRule, type PolicyBody, scaledAtLeastOne, withLimits } from './variants.js';

/**
 * Slack for comparisons of times, in ms; the Lua twin uses the same value. Times near 1.7e12 ms
 * carry float steps of about 2.4e-4 ms: one microsecond covers them.
 */
const EPSILON_MS = 1e-3;

/**
 * Whole units that fit now: the largest n with tat + n × interval − now ≤ tolerance, by the very
 * comparison a request of cost n meets, so `remaining` never disagrees with the next decision.
 */
function unitsAvailable(tat: number, now: number, intervalMs: number, toleranceMs: number): number {
  let n = Math.floor((toleranceMs - (tat - now)) / intervalMs);
  if (n < 0) n = 0;
  while (tat + (n + 1) * intervalMs - now <= toleranceMs + EPSILON_MS) n++;
  while (n > 0 && tat + n * intervalMs - now > toleranceMs + EPSILON_MS) n--;
  return n;
}

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
  stored: number | undefined,
  now: number,
  operation: Operation,
  cost: number,
  intervalMs: number,
  toleranceMs: number,
  maxDebt = Math.round(toleranceMs / intervalMs),
): Outcome<number> {
  let tat = stored === undefined || stored < now ? now : stored;
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
    write = true;
  } else {
    const next = tat + cost * intervalMs;
    if (next - now > toleranceMs + EPSILON_MS) {
      allowed = false;
      // With the same slack as the comparison: a request allowed at a whole millisecond waits no longer.
      retryAfterMs = Math.ceil(next - toleranceMs - now - EPSILON_MS);
    } else if (operation === 'limit') {
      tat = next;
      write = true;
    }
  }
  const keep = tat > now;
  // The Lua twin stores a TAT of whole microseconds as an integer (minus the count of µs) and any
  // other as a decimal; both read back exactly, so the form never changes a decision.
  const outcome: Outcome<number> = {
    allowed,
    remaining: unitsAvailable(tat, now, intervalMs, toleranceMs),
    resetMs: Math.ceil(tat - now),
    retryAfterMs,
    // A write that leaves nothing owed deletes; a read keeps what was there.
    state: write && keep ? tat : stored,
    ttlMs: write ? (keep ? Math.ceil(tat - now) : 0) : -1,
  };
  return fields === undefined ? outcome : { ...outcome, fields };
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
export function gcra(options: GcraOptions): Policy<number> {
  const raw = optionsObject('gcra options', options, true);
  knownKeys('gcra', raw, ['limit', 'periodMs', 'burst', 'share', ...DEBT_OPTION_KEYS]);
  const limit = positiveInteger('gcra.limit', raw.limit);
  const periodMs = durationMs('gcra.periodMs', raw.periodMs);
  const burst = raw.burst === undefined ? limit : positiveInteger('gcra.burst', raw.burst);
  const share = resolveShare('gcra.share', raw.share);
  const debt = debtOptions('gcra', raw);
  // The rate needs no rounding: the emission interval is a fraction of a millisecond as readily as a whole one.
  const body = (rate: number, units: number): PolicyBody<number> =>
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
export function tokenBucket(options: TokenBucketOptions): Policy<number> {
  const raw = optionsObject('tokenBucket options', options, true);
  knownKeys('tokenBucket', raw, ['capacity', 'refillPerSecond', 'share', ...DEBT_OPTION_KEYS]);
  const capacity = positiveInteger('tokenBucket.capacity', raw.capacity);
  const refillPerSecond = positiveNumber('tokenBucket.refillPerSecond', raw.refillPerSecond);
  const share = resolveShare('tokenBucket.share', raw.share);
  const debt = debtOptions('tokenBucket', raw);
  const body = (size: number, refill: number): PolicyBody<number> => {
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
): PolicyBody<number> {
  const toleranceMs = burst * intervalMs;
  const maxDebt = debt.maxDebt ?? burst;
  return {
    algorithm,
    script: 'gcra',
    args: [String(intervalMs), String(toleranceMs)],
    limit: burst,
    // The slack absorbs float steps: 3 × (1000 / 3) must stay one second, not become 1001 ms.
    windowMs: Math.ceil(toleranceMs - EPSILON_MS),
    maxCost: burst,
    maxDebt,
    unit: debt.unit,
    description,
    decide: (state, now, operation, cost) =>
      decideGcra(state, now, operation, cost, intervalMs, toleranceMs, maxDebt),
  };
}
