// A region's part of a global token bucket: the pure twin of budget-bucket.lua (the decision, and the lease the worker writes).
import type { Operation, Outcome, Policy } from '../types.js';

/** Slack for comparisons of token counts; the Lua twin uses the same value. */
const EPSILON = 1e-6;

/**
 * What a region keeps per identifier: its tokens at `last` (-1 for a full floor, when a lease was
 * written before any decision), and the lease it holds beyond its floor: `extra` tokens of capacity
 * (with the matching share of the rate: every lease keeps the global bucket's time to fill, `tau`)
 * until `until`, on the caller's clock. `base` is the floor's capacity as the last decision knew it,
 * which a lease written later refills with.
 */
export interface BudgetBucketState {
  tokens: number;
  last: number;
  extra: number;
  until: number;
  base: number;
}

/**
 * The tokens at `now`: refilled from `last` at the lease's rate while it held, then at the floor's,
 * and never above the capacity held at the time (a lease that ended cuts the tokens to the floor's).
 * Every rate and capacity used was held by the region over the time it is used for, which is what
 * keeps all regions together within the global bucket (see docs/regions.md).
 */
function tokensAt(stored: BudgetBucketState, now: number, tau: number, base: number): number {
  let tokens = stored.tokens < 0 ? base : stored.tokens;
  let at = stored.last;
  if (now > at) {
    if (stored.until > at) {
      const end = Math.min(now, stored.until);
      const capacity = base + stored.extra;
      tokens = Math.min(capacity, tokens + ((end - at) * capacity) / tau);
      at = end;
    }
    if (now > at) tokens = Math.min(base, tokens + ((now - at) * base) / tau);
  }
  return Math.min(tokens, capacityAt(stored, now, base));
}

function capacityAt(stored: BudgetBucketState, now: number, base: number): number {
  return now < stored.until ? base + stored.extra : base;
}

/**
 * When a state reads as none at all: once its lease is over and `tau` has passed since, the floor's
 * tokens are full again, which is what no state means. Read so by both twins, a state Redis has yet
 * to expire decides as the memory store's none does.
 */
function goneAt(until: number, last: number, tau: number): number {
  return Math.max(until, last) + tau;
}

function alive(stored: BudgetBucketState | undefined, now: number, tau: number): stored is BudgetBucketState {
  return stored !== undefined && now < goneAt(stored.until, stored.last, tau);
}

function kept(
  stored: BudgetBucketState | undefined,
  tokens: number,
  last: number,
  lease: Pick<BudgetBucketState, 'extra' | 'until' | 'base'>,
): BudgetBucketState {
  if (stored === undefined) return { tokens, last, ...lease };
  stored.tokens = tokens;
  stored.last = last;
  stored.extra = lease.extra;
  stored.until = lease.until;
  stored.base = lease.base;
  return stored;
}

/**
 * Decides one request of a region against its bucket: the floor (`base` tokens, refilled in `tau`)
 * plus the lease it holds. No state reads as a full floor: the state lives until that is true.
 */
export function decideBudgetBucket(
  stored: BudgetBucketState | undefined,
  now: number,
  operation: Operation,
  cost: number,
  tau: number,
  base: number,
): Outcome<BudgetBucketState> {
  const lease = alive(stored, now, tau) ? stored : { tokens: base, last: now, extra: 0, until: 0, base };
  let tokens = tokensAt(lease, now, tau, base);
  const capacity = capacityAt(lease, now, base);
  let allowed = true;
  let retryAfterMs = 0;
  let write = false;
  if (operation === 'refund') {
    tokens = Math.min(capacity, tokens + cost);
    write = true;
  } else if (tokens + EPSILON < cost) {
    allowed = false;
    retryAfterMs = capacity >= cost ? Math.ceil(((cost - tokens) * tau) / capacity) : Math.ceil(tau);
  } else if (operation === 'limit') {
    tokens = Math.max(0, tokens - cost);
    write = true;
  }
  const last = Math.max(now, lease.last);
  return {
    allowed,
    remaining: Math.floor(tokens + EPSILON),
    resetMs: capacity > 0 ? Math.ceil(((capacity - tokens) * tau) / capacity) : 0,
    retryAfterMs,
    state: write ? kept(stored, tokens, last, { extra: lease.extra, until: lease.until, base }) : stored,
    ttlMs: write ? Math.ceil(goneAt(lease.until, last, tau) - now) : -1,
  };
}

/**
 * Writes the lease the ledger granted the region: `extra` tokens of capacity until `until`, from
 * `now` on. The tokens are first brought to `now` under the lease held so far; with no decision
 * since the state was last gone, they are a full floor now (-1: the next decision knows the floor).
 */
export function leaseBudgetBucket(
  stored: BudgetBucketState | undefined,
  now: number,
  extra: number,
  until: number,
  tau: number,
): Outcome<BudgetBucketState> {
  const known = alive(stored, now, tau) && stored.tokens >= 0;
  const base = known ? stored.base : 0;
  const tokens = known ? tokensAt(stored, now, tau, base) : -1;
  const last = known ? Math.max(now, stored.last) : now;
  return {
    allowed: true,
    remaining: 0,
    resetMs: 0,
    retryAfterMs: 0,
    state: kept(stored, tokens, last, { extra, until, base }),
    ttlMs: Math.ceil(goneAt(until, last, tau) - now),
  };
}

/**
 * The policy a region decides a bucket budget with: the global policy's capacity (for headers and
 * `maxCost`), deciding against the region's floor (`base` tokens) and the lease it holds.
 */
export function budgetBucketPolicy(
  global: Policy,
  tau: number,
  base: number,
  description: string,
): Policy<BudgetBucketState> {
  return {
    algorithm: global.algorithm,
    rule: { name: 'budget-bucket', parameters: [tau, base] },
    limit: global.limit,
    windowMs: global.windowMs,
    maxCost: global.maxCost,
    description,
    decide: (state, now, operation, cost) => decideBudgetBucket(state, now, operation, cost, tau, base),
  };
}

/** The policy whose `limit` call writes a lease held until `until` (the cost is its extra capacity). */
export function budgetLeasePolicy(until: number, tau: number): Policy<BudgetBucketState> {
  return {
    algorithm: 'budgetLease',
    rule: { name: 'budget-bucket-lease', parameters: [until, tau] },
    limit: Number.MAX_SAFE_INTEGER,
    windowMs: Math.ceil(tau),
    maxCost: Number.MAX_SAFE_INTEGER,
    description: `budgetLease(until=${until})`,
    decide: (state, now, _operation, extra) => leaseBudgetBucket(state, now, extra, until, tau),
  };
}
