// The limiters of one config load: one per rule, made once and reused; overrides in a bounded cache.
import { createHash } from 'node:crypto';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { gcra, tokenBucket } from '../algorithms/gcra.js';
import { slidingLog } from '../algorithms/sliding-log.js';
import { slidingWindow } from '../algorithms/sliding-window.js';
import type { ErrorHook } from '../hooks.js';
import { createLimiter, type Limiter } from '../limiter.js';
import type { Policy, Store } from '../types.js';
import type { EnvoyAlgorithm, Rule, RuleLimit, StoreErrorAnswer } from './config.js';
import { UNIT_MS, type UnitName } from './units.js';

/** A limit as applied to a call: the rule's, or a descriptor's override. */
export interface AppliedLimit {
  /** Undefined when `requests_per_unit` is 0: every request is over, and no store is asked. */
  readonly limiter: Limiter | undefined;
  readonly requestsPerUnit: number;
  readonly unit: UnitName | undefined;
  readonly windowMs: number;
  readonly onStoreError: StoreErrorAnswer;
  /** `rate_limit.name`, reported in `current_limit.name`. */
  readonly name: string;
}

/** The most override limiters kept per config load: Envoy sends a few distinct ones, a client could send many. */
const MAX_OVERRIDES = 1000;

/** What limiters are built with. */
export interface LimiterSettings {
  readonly store: Store;
  /** Reports a store failure (once per outage is the caller's business). */
  readonly onError: ErrorHook;
}

function policyOf(
  algorithm: EnvoyAlgorithm,
  limit: number,
  windowMs: number,
  burst: number | undefined,
): Policy {
  switch (algorithm) {
    case 'fixedWindow':
      return fixedWindow({ limit, windowMs });
    case 'slidingWindow':
      return slidingWindow({ limit, windowMs });
    case 'slidingLog':
      return slidingLog({ limit, windowMs });
    case 'tokenBucket':
      return tokenBucket({ capacity: burst ?? limit, refillPerSecond: (limit * 1000) / windowMs });
    case 'gcra':
      return gcra({ limit, periodMs: windowMs, ...(burst === undefined ? {} : { burst }) });
  }
}

/**
 * The limiter's name, part of every key: the rule's path when it can be part of a key (printable
 * ASCII without braces or spaces, short enough), else a hash of it; then the algorithm and the
 * window, so that a config that changes either starts from fresh state rather than misreading old.
 */
export function limiterName(path: string, algorithm: EnvoyAlgorithm, windowMs: number): string {
  const suffix = `|${algorithm}|${windowMs}`;
  if (/^[\x21-\x7a|~]+$/.test(path) && path.length + suffix.length <= 128) return `${path}${suffix}`;
  return `envoy~${createHash('sha256').update(path).digest('base64url').slice(0, 22)}${suffix}`;
}

/** One config load's limiters. */
export class RuleLimiters {
  readonly #settings: LimiterSettings;
  readonly #byRule = new Map<Rule, AppliedLimit>();
  readonly #overrides = new Map<string, AppliedLimit>();

  constructor(rules: readonly Rule[], settings: LimiterSettings) {
    this.#settings = settings;
    for (const rule of rules) {
      const limit = rule.limit as RuleLimit;
      if (limit.unlimited) continue;
      this.#byRule.set(
        rule,
        this.#build(rule.path, limit, limit.requestsPerUnit, limit.unit, limit.windowMs, limit.name),
      );
    }
  }

  /** The limit of a rule with one (every rule of the config that is not unlimited). */
  forRule(rule: Rule): AppliedLimit | undefined {
    return this.#byRule.get(rule);
  }

  /**
   * The limit of a descriptor's override: the matched rule's algorithm and settings (a fixed window
   * when no rule matched, as in the reference) with the override's quota and unit.
   */
  forOverride(domain: string, rule: Rule | undefined, requestsPerUnit: number, unit: UnitName): AppliedLimit {
    const path = rule?.path ?? `${domain}|override`;
    const cacheKey = `${path}\n${requestsPerUnit}\n${unit}`;
    let applied = this.#overrides.get(cacheKey);
    if (applied === undefined) {
      const base = rule?.limit?.unlimited === false ? rule.limit : undefined;
      const settings: RuleLimit = {
        unlimited: false,
        requestsPerUnit,
        unit,
        windowMs: UNIT_MS[unit],
        algorithm: base?.algorithm ?? 'fixedWindow',
        // A burst written for the rule's own quota would not fit another: the override's quota is its burst.
        burst: undefined,
        onStoreError: base?.onStoreError ?? 'unavailable',
        timeoutMs: base?.timeoutMs,
        name: '',
        replaces: [],
      };
      applied = this.#build(path, settings, requestsPerUnit, unit, UNIT_MS[unit], '');
      // Bounded whatever clients send: past the bound, the cache starts again.
      if (this.#overrides.size >= MAX_OVERRIDES) this.#overrides.clear();
      this.#overrides.set(cacheKey, applied);
    }
    return applied;
  }

  #build(
    path: string,
    limit: RuleLimit,
    requestsPerUnit: number,
    unit: UnitName | undefined,
    windowMs: number,
    name: string,
  ): AppliedLimit {
    const applied = { requestsPerUnit, unit, windowMs, onStoreError: limit.onStoreError, name };
    if (requestsPerUnit === 0) return { ...applied, limiter: undefined };
    const limiter = createLimiter({
      store: this.#settings.store,
      policy: policyOf(limit.algorithm, requestsPerUnit, windowMs, limit.burst),
      name: limiterName(path, limit.algorithm, windowMs),
      // UNAVAILABLE is answered by the service from the decision's reason; the limiter only flags it.
      onStoreError: limit.onStoreError === 'unavailable' ? 'allow' : limit.onStoreError,
      ...(limit.timeoutMs === undefined ? {} : { timeoutMs: limit.timeoutMs }),
      onError: this.#settings.onError,
    });
    return { ...applied, limiter };
  }
}
