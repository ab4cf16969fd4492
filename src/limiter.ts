// createLimiter(): a limiter is one pipeline of the core (src/core/), deciding one call at a time.
// Knows no Redis, no HTTP.
import { type BudgetLimiter, budgetedLimiter } from './budget/limiter.js';
import type { BudgetOptions } from './budget/options.js';
import { Pipeline, RateLimiter } from './core/index.js';
import { type LimiterOptions, resolveLimiterOptions } from './options.js';
import type { Limiter } from './types.js';

export type { BudgetLimiter } from './budget/limiter.js';
export type { CallOptions, KeyOptions, Limiter, WaitDecision, WaitOptions } from './types.js';

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
export function createLimiter(options: LimiterOptions & { readonly budget: BudgetOptions }): BudgetLimiter;
export function createLimiter(options: LimiterOptions): Limiter;
export function createLimiter(options: LimiterOptions): Limiter {
  const resolved = resolveLimiterOptions(options);
  if (resolved.budget !== undefined) return budgetedLimiter(resolved, resolved.budget);
  return new RateLimiter(new Pipeline(resolved));
}
