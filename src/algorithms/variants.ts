// Limits per call (plans, tenants): one policy object per limit, made once, so that stores keep
// batching the calls of one limit together.
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { Operation, Outcome, Policy, RuleName, StoredLimitRule } from '../types.js';
import type { ResolvedDebt } from './debt.js';
import { DECIDE_INTO, type DecidesInto, type OutcomeInto } from './outcome-into.js';

/** Variants kept per policy. Beyond it the cache starts again: decisions stay right, batches split. */
const MAX_VARIANTS = 1024;

// 100 × 0.29 is 28.999999999999996 in binary floating point; a share written in decimal means 29.
const SLACK = 1e-9;

/** A policy as its factory builds it, before `withLimit` is attached. */
export type PolicyBody<S> = Omit<Policy<S>, 'withLimit'>;

/**
 * A call's limit scaled to the region's share, rounded down as the policy's own limit is. A call
 * whose limit leaves the region less than one unit is refused: it would deny everything.
 */
export function callLimit(limit: number, share: number): number {
  if (share === 1) return limit;
  const scaled = Math.floor(limit * share + SLACK);
  if (scaled < 1) {
    throw new SluiceError(
      ERROR_CODES.INVALID_LIMIT,
      `Expected \`limit\` × the policy's share to be at least 1, got ${limit} × ${share} = ${limit * share}: a region with no allowance would deny everything.`,
    );
  }
  return scaled;
}

/** `factor × value` rounded down, at least 1: a burst or capacity scaled with a call's limit. */
export function scaledAtLeastOne(value: number, factor: number): number {
  return Math.max(1, Math.floor(value * factor + SLACK));
}

/**
 * A policy's {@link PolicyRule.storedLimit}: how a limit stored per identifier becomes the
 * parameters `withLimit` would give (the Redis store's scripts apply it, src/stores/redis/lua/stored.lua).
 * `x` and `y`: the log's largest limit (`count`, 0 for none); the period and burst (`rate`); the
 * refill per second (`capacity`).
 */
export function limitRule(
  kind: 'count' | 'rate' | 'capacity',
  requested: number,
  share: number,
  debt: ResolvedDebt,
  x = 0,
  y = 0,
): StoredLimitRule {
  // Without a `maxDebt` of its own, a charge may owe one allowance of the limit it runs under.
  const own = { limit: requested, share, followsLimit: debt.maxDebt === undefined };
  if (kind === 'count') return Object.freeze({ ...own, kind, most: x });
  if (kind === 'rate') return Object.freeze({ ...own, kind, periodMs: x, burst: y });
  return Object.freeze({ ...own, kind, refillPerSecond: x });
}

/**
 * The policy for a requested limit, with `withLimit` attached: the same limit gives the policy
 * itself, another gives `variant(limit)`, made once and kept (see {@link Policy.withLimit}). With
 * `storedLimit`, the policy also takes limits stored per identifier (see {@link PolicyRule.storedLimit}).
 */
export function withLimits<S>(
  requested: number,
  base: PolicyBody<S>,
  variant: (limit: number) => PolicyBody<S>,
  storedLimit?: StoredLimitRule,
): Policy<S> {
  const variants = new Map<number, Policy<S>>();
  function withLimit(limit: number): Policy<S> {
    if (limit === requested) return policy;
    let found = variants.get(limit);
    if (found === undefined) {
      if (variants.size >= MAX_VARIANTS) variants.clear();
      found = { ...variant(limit), withLimit };
      variants.set(limit, found);
    }
    return found;
  }
  const policy: Policy<S> =
    storedLimit === undefined
      ? { ...base, withLimit }
      : { ...base, withLimit, rule: { ...base.rule, storedLimit } };
  return policy;
}

/**
 * The policy a limit stored for an identifier gives (see {@link PolicyRule.storedLimit}): `withLimit`'s
 * variant, or undefined when the policy cannot take that limit (a share under one unit, the log's
 * ceiling), which the scripts then do not apply either.
 */
export function storedVariant<S>(policy: Policy<S>, limit: number): Policy<S> | undefined {
  if (policy.withLimit === undefined || policy.rule.storedLimit === undefined) return undefined;
  try {
    return policy.withLimit(limit);
  } catch {
    return undefined;
  }
}

/** A window policy's twin: (state, now, operation, cost, limit, windowMs, maxDebt) -> outcome. */
type WindowTwin<S> = (
  stored: S | undefined,
  now: number,
  operation: Operation,
  cost: number,
  limit: number,
  windowMs: number,
  maxDebt: number,
  into?: OutcomeInto,
) => Outcome<S>;

/**
 * The body of a policy of `units` per `windowMs` (the windows and the log): its script's
 * parameters are the two, and a charge may owe `debt.maxDebt`, or one allowance, `units`.
 * `described` is the share's part of the description.
 */
export function windowBody<S>(
  algorithm: string,
  name: RuleName,
  units: number,
  windowMs: number,
  described: string,
  debt: ResolvedDebt,
  twin: WindowTwin<S>,
): PolicyBody<S> {
  const maxDebt = debt.maxDebt ?? units;
  const body: PolicyBody<S> & DecidesInto<S> = {
    algorithm,
    rule: { name, parameters: [units, windowMs] },
    limit: units,
    windowMs,
    maxCost: units,
    maxDebt,
    unit: debt.unit,
    description: `${algorithm}(limit=${units},windowMs=${windowMs}${described}${debt.described})`,
    decide: (state, now, operation, cost) => twin(state, now, operation, cost, units, windowMs, maxDebt),
    [DECIDE_INTO]: (into, state, now, operation, cost) =>
      twin(state, now, operation, cost, units, windowMs, maxDebt, into),
  };
  return body;
}
