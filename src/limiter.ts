// createLimiter(): validates each call, asks the store, and shapes the decision. Knows no Redis, no HTTP.
import { describeValue, ERROR_CODES, SluiceError } from './errors.js';
import { type LimiterOptions, resolveLimiterOptions } from './options.js';
import type { Decision, Operation, Policy, Store, StoreResult } from './types.js';

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
   * decide them in one script (the seed's `rl:{tenant:9}:user:42` and `rl:{tenant:9}:total`). The
   * tag is part of the key: calls with and without it count separately, so give it on every call
   * for that identifier. Choose one per entity (a tenant), never a constant: a constant tag would
   * put every identifier on one shard.
   * @default undefined (the identifier is its own tag)
   */
  readonly tag?: string;
}

/** Options of `reset` (and `refund`'s third argument). */
export interface KeyOptions {
  /** The tag the calls were made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
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

const MAX_IDENTIFIER_BYTES = 1024;

/** Checks an identifier; `option` names it in the message. */
export function checkIdentifier(identifier: unknown, option = 'identifier'): SluiceError | undefined {
  if (typeof identifier !== 'string' || identifier.length === 0) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`${option}\` to be a non-empty string, got ${describeValue(identifier)}.`,
    );
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit: only long strings need measuring.
  if (identifier.length * 3 > MAX_IDENTIFIER_BYTES && Buffer.byteLength(identifier) > MAX_IDENTIFIER_BYTES) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`${option}\` to be at most ${MAX_IDENTIFIER_BYTES} bytes of UTF-8, got ${Buffer.byteLength(identifier)} bytes.`,
    );
  }
  return undefined;
}

/** Checks a cost or refund amount against what the policy can grant. */
export function checkCost(option: string, cost: unknown, policy: Policy): SluiceError | undefined {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    return new SluiceError(
      ERROR_CODES.INVALID_COST,
      `Expected \`${option}\` to be a positive integer, got ${describeValue(cost)}.`,
    );
  }
  if (cost > policy.maxCost) {
    return new SluiceError(
      ERROR_CODES.COST_EXCEEDS_LIMIT,
      `Expected \`${option}\` to be at most ${policy.maxCost}, the most ${policy.description} can ever grant, got ${cost} (number).`,
    );
  }
  return undefined;
}

/** Checks a call's tag: absent, or a valid identifier (escaped into the key the same way). */
export function checkTag(tag: unknown): SluiceError | undefined {
  return tag === undefined ? undefined : checkIdentifier(tag, 'tag');
}

/** Reads a limiter's clock, validated: milliseconds, `undefined` for the store's clock, or the error. */
export function readClock(clock: (() => number) | undefined): number | SluiceError | undefined {
  if (clock === undefined) return undefined;
  const value = clock();
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    return new SluiceError(
      ERROR_CODES.INVALID_CLOCK,
      `Expected \`clock\` to return a finite number of milliseconds of at least 0, got ${describeValue(value)}.`,
    );
  }
  return value;
}

// The clock of each limiter createLimiter made, for all(): one atomic script runs at one time.
const CLOCKS = new WeakMap<Limiter, (() => number) | undefined>();

/** Whether `createLimiter` made this limiter, and its clock (`undefined`: the store's). */
export function limiterClock(limiter: Limiter): { readonly clock: (() => number) | undefined } | undefined {
  return CLOCKS.has(limiter) ? { clock: CLOCKS.get(limiter) } : undefined;
}

/**
 * Creates a limiter. Bad configuration throws a SluiceError here; bad calls reject with one and
 * write nothing.
 *
 * @example
 * const limiter = createLimiter({
 *   store: new RedisStore({ client: new Redis(), prefix: 'rl' }),
 *   policy: tokenBucket({ capacity: 100, refillPerSecond: 10 }),
 *   name: 'api',
 * });
 * const decision = await limiter.limit('client-42');
 * if (!decision.allowed) reply(429, { 'Retry-After': Math.ceil(decision.retryAfterMs / 1000) });
 */
export function createLimiter(options: LimiterOptions): Limiter {
  const { store, policy, name, clock } = resolveLimiterOptions(options);
  const limit = policy.limit;

  const now = (): number | SluiceError | undefined => readClock(clock);

  function shape(result: StoreResult): Decision {
    return {
      allowed: result.allowed,
      limit,
      remaining: result.remaining,
      resetMs: result.resetMs,
      retryAfterMs: result.retryAfterMs,
    };
  }

  function run(
    operation: Operation,
    identifier: string,
    cost: number,
    costOption: string,
    tag: string | undefined,
  ): Promise<Decision> {
    const invalid = checkIdentifier(identifier) ?? checkCost(costOption, cost, policy) ?? checkTag(tag);
    if (invalid !== undefined) return Promise.reject(invalid);
    const time = now();
    if (time instanceof SluiceError) return Promise.reject(time);
    return store.decide({ policy, name, identifier, tag, operation, cost, now: time }).then(shape);
  }

  const limiter: Limiter = {
    name,
    policy,
    store,
    limit: (identifier, options) => run('limit', identifier, options?.cost ?? 1, 'cost', options?.tag),
    peek: (identifier, options) => run('peek', identifier, options?.cost ?? 1, 'cost', options?.tag),
    refund: (identifier, amount = 1, options) => run('refund', identifier, amount, 'amount', options?.tag),
    reset: (identifier, options) => {
      const invalid = checkIdentifier(identifier) ?? checkTag(options?.tag);
      if (invalid !== undefined) return Promise.reject(invalid);
      return options?.tag === undefined
        ? store.reset(name, identifier)
        : store.reset(name, identifier, options.tag);
    },
  };
  CLOCKS.set(limiter, clock);
  return limiter;
}
