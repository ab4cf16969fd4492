// A storage for @nestjs/throttler on sluice's stores: its guard and decorators stay, each count is one atomic
// decision (Redis: one script), and blocks are sluice's penalties. Written to its interface; imports nothing of it.
import { fixedWindow } from '../../algorithms/fixed-window.js';
import { invalidOption, SluiceError } from '../../errors.js';
import { createLimiter, type Limiter } from '../../limiter.js';
import type { LimiterOptions } from '../../options.js';
import type { Decision, Policy } from '../../types.js';
import { optionsObject } from '../../validate.js';
import { Penalties } from '../penalties.js';
import { limiterSet } from '../routes.js';

/** What @nestjs/throttler's guard reads of each count (its `ThrottlerStorageRecord`, times in seconds). */
export interface ThrottlerStorageRecord {
  readonly totalHits: number;
  readonly timeToExpire: number;
  readonly isBlocked: boolean;
  readonly timeToBlockExpire: number;
}

/** Options of {@link SluiceThrottlerStorage}: those of `createLimiter`, with a policy made per throttler. */
export interface SluiceThrottlerStorageOptions extends Omit<LimiterOptions, 'policy' | 'name'> {
  /**
   * The policy for a throttler's `limit` per `ttl` (ms). Each request is then decided with its
   * route's `limit`, as `limiter.limit(key, { limit })` decides.
   * @default (limit, ttlMs) => fixedWindow({ limit, windowMs: ttlMs })
   * @example (limit, ttlMs) => gcra({ limit, periodMs: ttlMs })
   */
  readonly policy?: (limit: number, ttlMs: number) => Policy;
  /**
   * The start of the limiters' names: `<name>:<throttler>:<ttl>:<blockDuration>`, part of every key.
   * @default 'throttler'
   */
  readonly name?: string;
}

/** A throttler's limiter for one ttl, and the block after a refusal when it has one. */
interface Throttle {
  readonly limiter: Limiter;
  readonly block: Penalties | undefined;
}

/** Throttles kept at most: a `ttl` or `blockDuration` computed per request must not grow the map without end. */
const MAX_THROTTLES = 1000;

const seconds = (ms: number): number => Math.ceil(ms / 1000);

/**
 * A `ThrottlerStorage` for @nestjs/throttler: `ThrottlerModule.forRoot({ throttlers, storage: new
 * SluiceThrottlerStorage({ store }) })`. The guard, `@Throttle()` and `@SkipThrottle()` work as
 * before; each count is one atomic decision in the store, so every process shares it exactly, and
 * `blockDuration` keeps a refused client refused as throttler's own storage does. Two calls to the
 * store per request with a `blockDuration` (a look at the block, the count), one without; one more
 * for a refused request.
 *
 * @example
 * ThrottlerModule.forRoot({
 *   throttlers: [{ limit: 100, ttl: 60_000 }],
 *   storage: new SluiceThrottlerStorage({ store: new RedisStore({ client: redis }) }),
 * })
 */
export class SluiceThrottlerStorage {
  readonly #options: Omit<LimiterOptions, 'policy' | 'name'>;
  readonly #policy: (limit: number, ttlMs: number) => Policy;
  readonly #name: string;
  readonly #throttles = new Map<string, Throttle>();

  constructor(options: SluiceThrottlerStorageOptions) {
    const {
      policy,
      name = 'throttler',
      ...limiterOptions
    } = optionsObject('SluiceThrottlerStorage options', options, true);
    if (policy !== undefined && typeof policy !== 'function') {
      throw invalidOption('policy', 'a function of (limit, ttlMs) returning a policy', policy);
    }
    this.#options = limiterOptions as unknown as Omit<LimiterOptions, 'policy' | 'name'>;
    this.#policy =
      (policy as ((limit: number, ttlMs: number) => Policy) | undefined) ??
      ((limit, ttlMs) => fixedWindow({ limit, windowMs: ttlMs }));
    this.#name = name as string;
    // Bad limiter options (createLimiter's checks, unknown names included) fail here, not at the first request.
    try {
      createLimiter({
        ...this.#options,
        policy: fixedWindow({ limit: 1, windowMs: 1000 }),
        name: this.#name,
      });
    } catch (error) {
      if (!(error instanceof SluiceError)) throw error;
      throw new SluiceError(error.code, `SluiceThrottlerStorage: ${error.message}`, { cause: error });
    }
  }

  /** Counts a hit of `key` (throttler's interface: `ttl` and `blockDuration` in ms, times back in seconds). */
  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    const { limiter, block } = this.#throttle(throttlerName, ttl, limit, blockDuration);
    const held = await block?.check(key);
    if (held !== undefined) return refused(limit, held.entry.decision, held.entry.decision);
    const decision = await limiter.limit(key, { limit });
    if (decision.allowed) {
      return {
        totalHits: limit - decision.remaining,
        timeToExpire: seconds(decision.resetMs),
        isBlocked: false,
        timeToBlockExpire: 0,
      };
    }
    const started = await block?.refused(key);
    return refused(limit, decision, started?.entry.decision ?? decision);
  }

  #throttle(throttlerName: string, ttl: number, limit: number, blockDuration: number): Throttle {
    const id = `${throttlerName}:${ttl}:${blockDuration}`;
    const known = this.#throttles.get(id);
    if (known !== undefined) return known;
    const limiter = createLimiter({
      ...this.#options,
      policy: this.#policy(limit, ttl),
      name: `${this.#name}:${id}`,
    });
    const block =
      blockDuration > 0
        ? new Penalties(limiterSet('limiter', limiter), {
            ban: undefined,
            block: { durationMs: blockDuration },
          })
        : undefined;
    const made = { limiter, block };
    if (this.#throttles.size >= MAX_THROTTLES)
      this.#throttles.delete(this.#throttles.keys().next().value ?? '');
    this.#throttles.set(id, made);
    return made;
  }
}

/** A refused hit: over the limit, blocked until the block (or the refusal) ends. */
function refused(limit: number, decision: Decision, until: Decision): ThrottlerStorageRecord {
  return {
    totalHits: limit + 1,
    timeToExpire: seconds(decision.resetMs),
    isBlocked: true,
    timeToBlockExpire: seconds(until.retryAfterMs),
  };
}
