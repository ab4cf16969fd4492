// all(): several limiters decided as one; atomically by one script when they share a store and a slot.
import { Combined, type CombinedLimiter, groupFor } from './core/index.js';
import { invalidOption } from './errors.js';
import type { MetricsRecorder } from './hooks.js';
import { resolveRecorder } from './options.js';
import type { Limiter } from './types.js';
import { knownKeys, optionsObject } from './validate.js';

export type { CombinedCallOptions, CombinedLimiter, Identifiers } from './core/index.js';

/** Options of {@link all}. */
export interface AllOptions {
  /**
   * `true`: one script decides every key together (every limiter must be on the same store, and a
   * call's keys must share a cluster slot: same identifier, or a shared `tag`; otherwise the call
   * rejects with ERR_SLUICE_CROSS_SLOT). `false`: each limiter decides on its own, side by side,
   * and when one denies what the others granted is refunded.
   * @default true when every limiter uses the same store, false otherwise
   */
  readonly atomic?: boolean;
  /**
   * Counts the decisions of every limiter given (see `sluice/metrics`), as each limiter's own
   * `metrics` option would, from now on: also those made outside this all().
   * @default undefined (each limiter's own recorder, if any)
   */
  readonly metrics?: MetricsRecorder;
}

/**
 * Combines limiters: a request passes only when every one allows, and a denied request consumes
 * nothing anywhere. On one store, each check is one atomic script over every key (the keys must
 * share a cluster slot: the same identifier, or a shared `tag`); on several stores, limiters decide
 * side by side and grants are refunded when one denies.
 *
 * @example
 * const perUser = createLimiter({ store, policy: gcra({ limit: 100, periodMs: 60_000 }), name: 'user' });
 * const perTenant = createLimiter({ store, policy: gcra({ limit: 150, periodMs: 60_000 }), name: 'tenant' });
 * const both = all([perUser, perTenant]);
 * // keys rl:user:{tenant:9}:42 and rl:tenant:{tenant:9}:9: one slot, one script
 * const decision = await both.limit(['42', '9'], { tag: 'tenant:9' });
 * if (!decision.allowed) console.log(`denied by ${decision.deniedBy.join(', ')}`);
 */
export function all(limiters: readonly Limiter[], options?: AllOptions): CombinedLimiter {
  const raw = optionsObject('all options', options, false);
  knownKeys('all', raw, ['atomic', 'metrics']);
  if (raw.atomic !== undefined && typeof raw.atomic !== 'boolean') {
    throw invalidOption('all.atomic', 'a boolean', raw.atomic);
  }
  const metrics = resolveRecorder('all.metrics', raw.metrics);
  const group = groupFor(limiters, { atomic: raw.atomic as boolean | undefined, metrics });
  return new Combined(Object.freeze([...limiters]), group);
}
