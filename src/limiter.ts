// createLimiter(): a limiter is one member of the decision pipeline (src/core/), deciding groups of one.
// Knows no Redis, no HTTP.
import { Member } from './core/member.js';
import { decideTransient } from './core/pipeline.js';
import { SluiceError } from './errors.js';
import { type LimiterOptions, resolveLimiterOptions } from './options.js';
import type { Decision, Operation, Policy, Store } from './types.js';

/** Options of one call. */
export interface CallOptions {
  /**
   * Units this request takes (or, for `peek`, would take).
   * @default 1
   */
  readonly cost?: number;
  /**
   * A hash tag shared with other keys: the key becomes `<prefix>:<name>:{<tag>}:<identifier>`, so
   * limiters whose calls name the same tag keep their keys in one cluster slot and `all()` can
   * decide them in one script (`rl:user:{tenant:9}:42` and `rl:tenant:{tenant:9}:9`). The
   * tag is part of the key: calls with and without it count separately, so give it on every call
   * for that identifier. Choose one per entity (a tenant), never a constant: a constant tag would
   * put every identifier on one shard.
   * @default undefined (the identifier is its own tag)
   */
  readonly tag?: string;
  /**
   * This call's quota instead of the policy's own, for plans, tenants and per-customer limits: the
   * windows' and the log's `limit`; GCRA's `limit` per `periodMs`, its burst scaled alike; the
   * token bucket's `capacity`, its refill rate scaled alike (the time to refill stays the same).
   * The decision reports it as `limit`. What was used is kept when it changes: the windows and the
   * log keep the units counted, so a lower limit may leave none; GCRA and the bucket keep the time
   * until they are full again, so a plan twice as large has twice as many units left.
   * @default the policy's own
   */
  readonly limit?: number;
}

/** Options of `reset` (and `refund`'s third argument). */
export interface KeyOptions {
  /** The tag the calls were made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
  /**
   * For `refund`: the per-call `limit` the units were taken under, so that GCRA and the token
   * bucket give back the same share of their period (see {@link CallOptions.limit}).
   */
  readonly limit?: number;
}

/** A rate limiter bound to one store, one policy and one name. */
export interface Limiter {
  readonly name: string;
  readonly policy: Policy;
  readonly store: Store;
  /** Takes `cost` units if they are available; a denied request takes nothing. */
  limit(identifier: string, options?: CallOptions): Promise<Decision>;
  /** The decision `limit` would give, consuming nothing. `remaining` is what is left now. */
  peek(identifier: string, options?: CallOptions): Promise<Decision>;
  /** Gives back `amount` units (at most what is in use), e.g. for a request that turned out free. */
  refund(identifier: string, amount?: number, options?: KeyOptions): Promise<Decision>;
  /** Forgets the identifier: its next request starts with a full allowance. */
  reset(identifier: string, options?: KeyOptions): Promise<void>;
}

let memberOf: (limiter: unknown) => Member | undefined;

/**
 * A limiter made by createLimiter(): one member of the pipeline, deciding groups of one. Its
 * methods are its own properties, so `{ ...limiter, limit }` wraps it as a plain object did.
 */
class RateLimiter implements Limiter {
  readonly #member: Member;
  readonly name: string;
  readonly policy: Policy;
  readonly store: Store;
  readonly limit: Limiter['limit'];
  readonly peek: Limiter['peek'];
  readonly refund: Limiter['refund'];
  readonly reset: Limiter['reset'];

  static {
    memberOf = (limiter) =>
      typeof limiter === 'object' && limiter !== null && #member in limiter ? limiter.#member : undefined;
  }

  constructor(member: Member) {
    this.#member = member;
    this.name = member.name;
    this.policy = member.policy;
    this.store = member.store;
    const decide = (
      operation: Operation,
      identifier: string,
      cost: number,
      costOption: string,
      tag: string | undefined,
      limit: number | undefined,
    ): Promise<Decision> => {
      const call = member.transientCall(operation, identifier, cost, costOption, tag, limit);
      return call instanceof SluiceError ? Promise.reject(call) : decideTransient(call);
    };
    this.limit = (identifier, options) =>
      options === undefined
        ? decide('limit', identifier, 1, 'cost', undefined, undefined)
        : decide('limit', identifier, options.cost ?? 1, 'cost', options.tag, options.limit);
    this.peek = (identifier, options) =>
      decide('peek', identifier, options?.cost ?? 1, 'cost', options?.tag, options?.limit);
    this.refund = (identifier, amount = 1, options) =>
      decide('refund', identifier, amount, 'amount', options?.tag, options?.limit);
    this.reset = (identifier, options) => member.reset(identifier, options?.tag);
  }
}

/** The pipeline member behind a limiter made by createLimiter(), or undefined for any other value. */
export function limiterMember(limiter: unknown): Member | undefined {
  return memberOf(limiter);
}

/** Whether a value is a limiter made by createLimiter() (what all() and the HTTP middleware accept). */
export function isLimiter(value: unknown): value is Limiter {
  return memberOf(value) !== undefined;
}

/**
 * Creates a limiter. Bad configuration throws a SluiceError here; bad calls reject with one and
 * write nothing. A store that fails or is late never makes a call reject: `onStoreError` decides.
 *
 * @example
 * const limiter = createLimiter({
 *   store: new RedisStore({ client: new Redis({ enableOfflineQueue: false, maxRetriesPerRequest: 0 }) }),
 *   policy: tokenBucket({ capacity: 100, refillPerSecond: 10 }),
 *   name: 'api',
 *   onStoreError: 'fallback',
 *   denyCache: true,
 * });
 * const decision = await limiter.limit('client-42');
 * if (!decision.allowed) reply(429, { 'Retry-After': Math.ceil(decision.retryAfterMs / 1000) });
 */
export function createLimiter(options: LimiterOptions): Limiter {
  return new RateLimiter(new Member(resolveLimiterOptions(options)));
}
