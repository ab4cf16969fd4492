// Concurrency: at most `limit` slots held at once per identifier, by leases that expire. The pure twin of concurrency.lua.
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { Operation, Outcome, Policy } from '../types.js';
import { durationMs, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { type PolicyBody, withLimits } from './variants.js';

/**
 * The largest limit `concurrency()` accepts. Each held slot is one sorted-set entry (about 90 bytes),
 * and an acquisition of `cost` slots inserts `cost` of them: at 10 000, the costliest acquisition
 * stays within a few milliseconds of Redis time.
 */
export const CONCURRENCY_MAX_LIMIT = 10_000;

/** One lease as the twin keeps it: when it lapses, and how many slots it holds. */
interface HeldLease {
  expiresAt: number;
  readonly slots: number;
}

/**
 * The state kept per identifier: the last fencing token issued, and the leases held (expired ones
 * until a call trims them), by id. The twin updates it in place.
 */
export interface ConcurrencyState {
  token: number;
  readonly leases: Map<string, HeldLease>;
}

/** What a call of the twin works with: the state, the time, the policy's numbers. */
interface At {
  readonly state: ConcurrencyState;
  readonly now: number;
  readonly limit: number;
}

function freshState(): ConcurrencyState {
  return { token: 0, leases: new Map() };
}

/** Slots held by leases live at `now`. */
function liveSlots(state: ConcurrencyState, now: number): number {
  let used = 0;
  for (const lease of state.leases.values()) if (lease.expiresAt > now) used += lease.slots;
  return used;
}

/** Frees the slots of leases that expired (`expiresAt <= now`); how many slots that was. */
function trim(state: ConcurrencyState, now: number): number {
  let reclaimed = 0;
  for (const [id, lease] of state.leases) {
    if (lease.expiresAt <= now) {
      reclaimed += lease.slots;
      state.leases.delete(id);
    }
  }
  return reclaimed;
}

/** Milliseconds until the last live lease lapses; 0 when none is held. */
function resetMs(state: ConcurrencyState, now: number): number {
  let latest = Number.NEGATIVE_INFINITY;
  for (const lease of state.leases.values()) if (lease.expiresAt > latest) latest = lease.expiresAt;
  return latest > now ? Math.ceil(latest - now) : 0;
}

/** The wait until `needed` live slots have lapsed: the needed-th soonest expiry among them. */
function waitMs(state: ConcurrencyState, now: number, needed: number): number {
  const expiries: number[] = [];
  for (const lease of state.leases.values()) {
    if (lease.expiresAt <= now) continue;
    for (let j = 0; j < lease.slots; j++) expiries.push(lease.expiresAt);
  }
  expiries.sort((a, b) => a - b);
  return Math.ceil((expiries[needed - 1] as number) - now);
}

/**
 * When the state's life is over: a lease length past its last slot (so that a call in that time
 * counts the slots that lapsed unreleased), and not before the clock has passed the last token's
 * millisecond (a token issued after the state is gone, read from the same clock, is then greater).
 */
function keepUntil(state: ConcurrencyState, leaseMs: number): number {
  let until = Math.floor(state.token / 1000) + 1;
  for (const lease of state.leases.values()) {
    if (lease.expiresAt + leaseMs > until) until = lease.expiresAt + leaseMs;
  }
  return until;
}

function keepMs(state: ConcurrencyState, now: number, leaseMs: number): number {
  return Math.max(1, Math.ceil(keepUntil(state, leaseMs) - now));
}

function remainingOf(limit: number, used: number): number {
  return used >= limit ? 0 : limit - used;
}

function acquire(at: At, cost: number, leaseMs: number, id: string): Outcome<ConcurrencyState> {
  const { state, now, limit } = at;
  const reclaimed = trim(state, now);
  const used = liveSlots(state, now);
  if (used + cost > limit) {
    // A refused acquisition takes nothing.
    const retryAfterMs = waitMs(state, now, used + cost - limit);
    const remaining = remainingOf(limit, used);
    return { ...settled(at, false, remaining, retryAfterMs), fields: [0, 0, reclaimed] };
  }
  // The clock's microsecond, or one more than the last token when the clock has not moved past it.
  let token = Math.floor(now * 1000 + 0.5);
  if (token <= state.token) token = state.token + 1;
  if (token < 1) token = 1;
  state.token = token;
  const expiresAt = now + leaseMs;
  state.leases.set(id, { expiresAt, slots: cost });
  return {
    ...settled(at, true, remainingOf(limit, used + cost), 0),
    ttlMs: keepMs(state, now, leaseMs),
    fields: [token, Math.ceil(expiresAt), reclaimed],
  };
}

function peek(at: At, cost: number): Outcome<ConcurrencyState> {
  const { state, now, limit } = at;
  const used = liveSlots(state, now);
  const allowed = used + cost <= limit;
  const retryAfterMs = allowed ? 0 : waitMs(state, now, used + cost - limit);
  return settled(at, allowed, remainingOf(limit, used), retryAfterMs);
}

function release(at: At, id: string): Outcome<ConcurrencyState> {
  const { state, now, limit } = at;
  const reclaimed = trim(state, now);
  const released = state.leases.delete(id) ? 1 : 0;
  const remaining = remainingOf(limit, liveSlots(state, now));
  return { ...settled(at, true, remaining, 0), fields: [released, reclaimed] };
}

function extend(at: At, leaseMs: number, id: string, ms: string | undefined): Outcome<ConcurrencyState> {
  const { state, now, limit } = at;
  const reclaimed = trim(state, now);
  const lease = state.leases.get(id);
  let extendedTo = 0;
  let ttlMs = -1;
  if (lease !== undefined) {
    const length = ms === undefined || ms === '' ? leaseMs : Number(ms);
    lease.expiresAt = now + length;
    extendedTo = Math.ceil(lease.expiresAt);
    ttlMs = keepMs(state, now, leaseMs);
  }
  const remaining = remainingOf(limit, liveSlots(state, now));
  const fields = [lease === undefined ? 0 : 1, extendedTo, reclaimed];
  return { ...settled(at, true, remaining, 0), ttlMs, fields };
}

/** An outcome that also drops a state whose life was over (`ttlMs` 0), as the script deletes its key. */
function forgetting(outcome: Outcome<ConcurrencyState>, lapsed: boolean): Outcome<ConcurrencyState> {
  return lapsed ? { ...outcome, ttlMs: 0 } : outcome;
}

/** The outcome's common part; the state is kept as it is (`ttlMs` -1) unless a caller says otherwise. */
function settled(
  at: At,
  allowed: boolean,
  remaining: number,
  retryAfterMs: number,
): Outcome<ConcurrencyState> {
  const exists = at.state.token > 0 || at.state.leases.size > 0;
  return {
    allowed,
    remaining,
    resetMs: resetMs(at.state, at.now),
    retryAfterMs,
    state: exists ? at.state : undefined,
    ttlMs: -1,
  };
}

/**
 * Decides one call: `limit` acquires `cost` slots for the lease named by `operands[0]`, `peek`
 * looks, `release` frees the lease `operands[0]`, `extend` renews it for `operands[1]` ms (empty:
 * `leaseMs`). Expired leases are freed by the calls that write, by the same clock that decides.
 */
export function decideConcurrency(
  stored: ConcurrencyState | undefined,
  now: number,
  operation: Operation,
  cost: number,
  limit: number,
  leaseMs: number,
  operands: readonly string[] | undefined,
): Outcome<ConcurrencyState> {
  // A state whose life is over by this clock is forgotten, as the store would have expired it by
  // its own (the script deletes such a key: a caller's clock may run ahead of the server's).
  const lapsed = stored !== undefined && now >= keepUntil(stored, leaseMs);
  const at: At = { state: stored === undefined || lapsed ? freshState() : stored, now, limit };
  const id = operands?.[0] ?? '';
  switch (operation) {
    case 'limit':
      return acquire(at, cost, leaseMs, id);
    case 'peek':
      return peek(at, cost);
    case 'release':
      return forgetting(release(at, id), lapsed);
    case 'extend':
      return forgetting(extend(at, leaseMs, id, operands?.[1]), lapsed);
    default:
      throw new SluiceError(
        ERROR_CODES.UNSUPPORTED_OPERATION,
        `Expected an operation concurrency() has, got ${JSON.stringify(operation)}.`,
      );
  }
}

/** Options of {@link concurrency}. */
export interface ConcurrencyOptions {
  /** Slots an identifier may hold at once (requests in flight); at most {@link CONCURRENCY_MAX_LIMIT}. */
  readonly limit: number;
  /**
   * How long a lease holds its slots unless released or extended, in ms: the longest a crashed or
   * stuck holder keeps them. Longer than your slowest request, or extend while it runs.
   */
  readonly leaseMs: number;
}

/**
 * At most `limit` requests in flight per identifier, across every process: `limit()` acquires a
 * slot and its decision carries a `lease`; `release(identifier, lease)` frees it. A lease that is
 * never released (its holder crashed) lapses after `leaseMs`, never before. Each lease carries a
 * fencing token that strictly increases per identifier.
 *
 * @example
 * const inFlight = createLimiter({ store, policy: concurrency({ limit: 100, leaseMs: 30_000 }), name: 'reports' });
 * const decision = await inFlight.limit(userId);
 * if (decision.lease) {
 *   try { await buildReport(); } finally { await inFlight.release(userId, decision.lease); }
 * }
 */
export function concurrency(options: ConcurrencyOptions): Policy<ConcurrencyState> {
  const raw = optionsObject('concurrency options', options, true);
  knownKeys('concurrency', raw, ['limit', 'leaseMs']);
  const limit = positiveInteger('concurrency.limit', raw.limit);
  if (limit > CONCURRENCY_MAX_LIMIT) {
    throw new SluiceError(
      ERROR_CODES.LIMIT_TOO_HIGH,
      `Expected \`concurrency.limit\` to be at most ${CONCURRENCY_MAX_LIMIT}, got ${limit} (number): each held slot is one entry in the store.`,
    );
  }
  const leaseMs = durationMs('concurrency.leaseMs', raw.leaseMs);
  const body = (slots: number): PolicyBody<ConcurrencyState> => ({
    algorithm: 'concurrency',
    rule: { name: 'concurrency', parameters: [slots, leaseMs] },
    limit: slots,
    // No window: for headers that need one, a lease's length is the period a slot can be held.
    windowMs: leaseMs,
    maxCost: slots,
    description: `concurrency(limit=${slots},leaseMs=${leaseMs})`,
    leaseMs,
    decide: (state, now, operation, cost, operands) =>
      decideConcurrency(state, now, operation, cost, slots, leaseMs, operands),
  });
  return withLimits(limit, body(limit), (perCall) => {
    if (perCall > CONCURRENCY_MAX_LIMIT) {
      throw new SluiceError(
        ERROR_CODES.LIMIT_TOO_HIGH,
        `Expected \`limit\` to be at most ${CONCURRENCY_MAX_LIMIT} for concurrency(), got ${perCall} (number): each held slot is one entry in the store.`,
      );
    }
    return body(perCall);
  });
}
