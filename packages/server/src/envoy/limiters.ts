// The limiters of one config load: one per rule, made once and reused; overrides in a bounded cache.
import { createHash } from 'node:crypto';
import type { BudgetOptions, ErrorHook, MetricsRecorder, Policy, Store } from 'sluice';
import {
  type BudgetLimiter,
  createLimiter,
  fixedWindow,
  gcra,
  type Limiter,
  SLIDING_LOG_MAX_LIMIT,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from 'sluice';
import type { EnvoyAlgorithm, Rule, RuleLimit, StoreErrorAnswer } from './config.js';
import type { CurrentLimitMessage } from './messages.js';
import { RESPONSE_UNIT, UNIT_MS, type UnitName } from './units.js';

/** A limit as applied to a call: the rule's, or a descriptor's override. */
export interface AppliedLimit {
  /** Undefined when `requests_per_unit` is 0: every request is over, and no store is asked. */
  readonly limiter: Limiter | undefined;
  /** The per-call limit an override asks of its limiter; undefined for the rule's own. */
  readonly callLimit: number | undefined;
  /** The most hits one call can ever be granted under this limit. */
  readonly maxCost: number;
  readonly requestsPerUnit: number;
  readonly unit: UnitName | undefined;
  readonly windowMs: number;
  readonly onStoreError: StoreErrorAnswer;
  /** `rate_limit.name`, reported in `current_limit.name`. */
  readonly name: string;
  /** Calls with hits are charged, past the limit if need be (see `RuleLimit.chargeOverLimit`). */
  readonly chargeOverLimit: boolean;
  /** Its status's `current_limit`, made once with the limit (a status reports it as is). */
  readonly currentLimit: CurrentLimitMessage;
}

function currentLimitOf(
  name: string,
  requestsPerUnit: number,
  unit: UnitName | undefined,
): CurrentLimitMessage {
  return { name, requests_per_unit: requestsPerUnit, unit: unit === undefined ? 0 : RESPONSE_UNIT[unit] };
}

/** The most override limiters kept per config load: one per rule and unit is the most Envoy needs. */
const MAX_OVERRIDES = 1000;

/** What limiters are built with. */
export interface LimiterSettings {
  readonly store: Store;
  /**
   * A budget shared with other regions: each rule's limit is shared (sliding logs' aside, whose
   * algorithm cannot be), overrides stay this region's own (they ask a limit per call).
   */
  readonly budget?: BudgetOptions | undefined;
  /**
   * The recorder the service's /metrics reads: the rules that share the budget report to it, so
   * that what their region holds and asks shows there (`sluice_budget_*`) beside their decisions.
   */
  readonly recorder?: MetricsRecorder | undefined;
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
  readonly #overrides = new Map<string, Limiter>();
  /** The limiters that share a budget, whose workers `close` stops. */
  readonly #budgeted: BudgetLimiter[] = [];

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

  /** Stops the background work of the limiters that share a budget. */
  close(): void {
    for (const limiter of this.#budgeted) limiter.close();
  }

  /** The limit of a rule with one (every rule of the config that is not unlimited). */
  forRule(rule: Rule): AppliedLimit | undefined {
    return this.#byRule.get(rule);
  }

  /**
   * The limit of a descriptor's override: the override's quota as a per-call limit, on a limiter of
   * the override's unit with the matched rule's algorithm (a fixed window when no rule matched, as
   * in the reference). When the unit is the rule's, that is the rule's own limiter and counters.
   */
  forOverride(domain: string, rule: Rule | undefined, requestsPerUnit: number, unit: UnitName): AppliedLimit {
    const windowMs = UNIT_MS[unit];
    const base = rule?.limit?.unlimited === false ? rule.limit : undefined;
    let algorithm = base?.algorithm ?? 'fixedWindow';
    // The log keeps one entry per request: past its bound, the sliding window approximates it.
    if (algorithm === 'slidingLog' && requestsPerUnit > SLIDING_LOG_MAX_LIMIT) algorithm = 'slidingWindow';
    const path = rule?.path ?? `${domain}|override`;
    const cacheKey = `${path}\n${algorithm}\n${windowMs}`;
    const own = rule === undefined ? undefined : this.#byRule.get(rule);
    // A rule's limiter that shares a budget takes no limit per call: overrides get one of their own.
    let limiter =
      own?.limiter !== undefined &&
      own.windowMs === windowMs &&
      base?.algorithm === algorithm &&
      !this.#budgeted.includes(own.limiter as BudgetLimiter)
        ? own.limiter
        : this.#overrides.get(cacheKey);
    if (limiter === undefined && requestsPerUnit > 0) {
      const settings: RuleLimit = {
        unlimited: false,
        requestsPerUnit,
        unit,
        windowMs,
        algorithm,
        // A burst written for the rule's own quota would not fit another: the override's quota is its burst.
        burst: undefined,
        onStoreError: base?.onStoreError ?? 'unavailable',
        timeoutMs: base?.timeoutMs,
        overrides: base?.overrides ?? false,
        name: '',
        replaces: [],
        chargeOverLimit: base?.chargeOverLimit ?? false,
      };
      limiter = this.#limiter(path, settings, requestsPerUnit, windowMs, false);
      // Bounded whatever clients send: past the bound, the cache starts again.
      if (this.#overrides.size >= MAX_OVERRIDES) this.#overrides.clear();
      this.#overrides.set(cacheKey, limiter);
    }
    const applied = {
      requestsPerUnit,
      unit,
      windowMs,
      onStoreError: base?.onStoreError ?? 'unavailable',
      name: '',
      // An override changes the quota, not how the rule is counted.
      chargeOverLimit: base?.chargeOverLimit ?? false,
      currentLimit: currentLimitOf('', requestsPerUnit, unit),
    } as const;
    if (limiter === undefined || requestsPerUnit === 0)
      return { ...applied, limiter: undefined, callLimit: undefined, maxCost: 0 };
    const policy = limiter.policy.withLimit?.(requestsPerUnit) ?? limiter.policy;
    return { ...applied, limiter, callLimit: requestsPerUnit, maxCost: policy.maxCost };
  }

  #build(
    path: string,
    limit: RuleLimit,
    requestsPerUnit: number,
    unit: UnitName | undefined,
    windowMs: number,
    name: string,
  ): AppliedLimit {
    const applied = {
      requestsPerUnit,
      unit,
      windowMs,
      onStoreError: limit.onStoreError,
      name,
      callLimit: undefined,
      chargeOverLimit: limit.chargeOverLimit,
      currentLimit: currentLimitOf(name, requestsPerUnit, unit),
    };
    if (requestsPerUnit === 0) return { ...applied, limiter: undefined, maxCost: 0 };
    const limiter = this.#limiter(path, limit, requestsPerUnit, windowMs, true);
    return { ...applied, limiter, maxCost: limiter.policy.maxCost };
  }

  #limiter(
    path: string,
    limit: RuleLimit,
    requestsPerUnit: number,
    windowMs: number,
    rule: boolean,
  ): Limiter {
    const options = {
      store: this.#settings.store,
      policy: policyOf(limit.algorithm, requestsPerUnit, windowMs, limit.burst),
      name: limiterName(path, limit.algorithm, windowMs),
      // UNAVAILABLE is answered by the service from the decision's reason; the limiter only flags it.
      onStoreError: limit.onStoreError === 'unavailable' ? 'allow' : limit.onStoreError,
      ...(limit.timeoutMs === undefined ? {} : { timeoutMs: limit.timeoutMs }),
      overrides: limit.overrides,
      onError: this.#settings.onError,
    } as const;
    const budget = this.#settings.budget;
    if (budget === undefined || !rule || limit.algorithm === 'slidingLog') return createLimiter(options);
    const { recorder } = this.#settings;
    const limiter = createLimiter({
      ...options,
      budget,
      ...(recorder === undefined ? {} : { metrics: recorder }),
    });
    this.#budgeted.push(limiter);
    return limiter;
  }
}
