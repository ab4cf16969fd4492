// The algorithm contract: a policy, the pure twin's `decide` and what it returns, and the rule a store
// that decides elsewhere (Redis) runs by name. Knows no store and no wire format.

/**
 * What a request asks of a policy: take units, look without taking, give units back, take units
 * whether or not they are there (`charge`: usage known after the fact, into debt up to `maxDebt`),
 * take units in the first future slot where they fit (`schedule`, for `wait()`: GCRA and the token
 * bucket), take as many as are free up to a number (`takeUpTo`), or free or renew a concurrency policy's lease. What each one means to the scripts, the
 * stores and the limiter is one entry of `OPERATIONS` (src/operations/, one module each).
 */
export type Operation =
  | 'limit'
  | 'peek'
  | 'refund'
  | 'charge'
  | 'schedule'
  | 'release'
  | 'extend'
  | 'takeUpTo';

/**
 * The rules an algorithm's twin decides by, each one function (a store that runs them elsewhere,
 * such as Redis, implements each by this name). The `budget-*` ones are a region's part of a global
 * budget (see `budget` in createLimiter's options): its decisions and its ledger's writes.
 */
export type RuleName =
  | 'fixed-window'
  | 'sliding-log'
  | 'sliding-window'
  | 'gcra'
  | 'concurrency'
  | 'budget-window'
  | 'budget-window-grant'
  | 'budget-window-release'
  | 'budget-window-sync'
  | 'budget-bucket'
  | 'budget-bucket-lease';

/**
 * What a pure twin returns: the decision fields the store does not know (`limit` is the policy's)
 * and what to keep. `ttlMs` is -1 when nothing changed, 0 when the state is to be deleted, and
 * otherwise how long to keep `state`.
 */
export interface Outcome<S> {
  readonly allowed: boolean;
  readonly remaining: number;
  readonly resetMs: number;
  readonly retryAfterMs: number;
  readonly state: S | undefined;
  readonly ttlMs: number;
  /**
   * An operation's own result fields (see {@link StoreResult.fields}); absent for limit, peek and
   * refund. `charge`: the retry for a cost of 1, the debt and the units cut off.
   */
  readonly fields?: readonly number[];
}

/**
 * A policy: one algorithm with its parameters. The memory store runs `decide`; the Redis store
 * runs its own implementation of `rule`. Both implement the same rule.
 */
export interface Policy<S = unknown> {
  /** Algorithm name as users wrote it, e.g. `tokenBucket`. */
  readonly algorithm: string;
  /** The rule `decide` applies and its parameters, for stores that decide outside this process. */
  readonly rule: PolicyRule;
  /** The `limit` reported in decisions: the most ever granted at once. */
  readonly limit: number;
  /**
   * The period in which the policy grants `limit` units, for headers (`q=limit;w=windowMs`): the
   * window; for GCRA and the token bucket, the time `limit` units take to come back (a GCRA of 10
   * per minute with a burst of 2 grants 2 per 12 s).
   */
  readonly windowMs: number;
  /** The largest cost a single request may ask; larger ones could never be granted. */
  readonly maxCost: number;
  /** A stable text naming the policy and its parameters, e.g. `tokenBucket(capacity=100,refillPerSecond=10)`. */
  readonly description: string;
  /**
   * Whether `decide` and the script take `schedule`: a future slot handed out in one call (GCRA and
   * the token bucket know when their next unit comes). `wait()` polls the other policies.
   */
  readonly schedules?: boolean;
  /**
   * The most units an identifier may owe past its limit after a `charge`; what a charge would take
   * beyond it is cut off (and reported). Absent: one full allowance, `limit`.
   */
  readonly maxDebt?: number;
  /**
   * What one unit is (`requests`, `content-bytes`, `tokens`), for headers: the IETF `qu` parameter
   * names a registered unit, and a policy counted in a unit the headers cannot name is left out of
   * them. Absent: `requests`.
   */
  readonly unit?: string;
  /**
   * The pure twin of the script. `state` is what the previous call returned, which the built-in
   * twins update in place and return (the log is large; the windows' small objects would otherwise
   * be replaced on every request); `now` is in milliseconds.
   */
  decide(
    state: S | undefined,
    now: number,
    operation: Operation,
    cost: number,
    operands?: readonly string[],
  ): Outcome<S>;
  /**
   * The same policy with a quota of `limit` units instead of its own, for one call (plans, tenants):
   * the windows' and the log's `limit`; GCRA's rate with its burst scaled alike; the token bucket's
   * capacity and refill rate scaled alike. The same object for the same `limit` (stores batch by
   * policy). Validated by the limiter beforehand: a positive safe integer (at most 1000 for the log).
   */
  withLimit?(limit: number): Policy<S>;
  /**
   * Present on policies whose units are held and given back rather than spent over time (a
   * concurrency policy): how long a lease lasts, in ms. Their `limit` acquires a lease, `release`
   * and `extend` act on it, and `refund` does not apply.
   */
  readonly leaseMs?: number;
  /**
   * Operations a limiter with this policy refuses, each with why (the error's message), checked by
   * the operation before anything is written: a region's part of a global budget holds only what was
   * granted to it, which a `charge` (or a reservation, settled by one) could pass. Absent: none.
   */
  readonly refuses?: Readonly<Partial<Record<'charge' | 'reserve', string>>>;
}

/** What a policy's `decide` computes, in the algorithm's own terms (see {@link Policy.rule}). */
export interface PolicyRule {
  readonly name: RuleName;
  /**
   * The rule's two parameters: a window's (or the log's) limit and length in ms; GCRA's and the
   * token bucket's interval and tolerance in ms; concurrency's slots and lease in ms.
   */
  readonly parameters: readonly [number, number];
  /**
   * How a limit stored for an identifier (`LimiterOptions.overrides`) becomes the parameters,
   * as `withLimit` makes them: `count` scales the windows' and the log's limit (at most `most`, 0
   * for no ceiling); `rate` GCRA's, from its period and burst; `capacity` the bucket's, from its
   * refill rate. `followsLimit` when the policy has no `maxDebt` of its own, so that a charge may owe
   * one allowance of the stored limit. Absent: the policy takes no stored limit.
   */
  readonly storedLimit?: StoredLimitRule;
}

/** See {@link PolicyRule.storedLimit}; `limit` and `share` are the policy's own. */
export type StoredLimitRule = {
  readonly limit: number;
  readonly share: number;
  readonly followsLimit: boolean;
} & (
  | { readonly kind: 'count'; readonly most: number }
  | { readonly kind: 'rate'; readonly periodMs: number; readonly burst: number }
  | { readonly kind: 'capacity'; readonly refillPerSecond: number }
);
