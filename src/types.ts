// The words every other file speaks: decisions, policies, the pure twins' contract, and stores.
import type {
  Denial,
  DenyOptions,
  StoredEntries,
  StoredLimit,
  StoredLimitOptions,
  StoredOptions,
} from './stored-types.js';

export type * from './stored-types.js';

/**
 * Why a decision was not made by the store in the ordinary way. Absent when the store decided.
 * `denied`: the identifier is denied (`limiter.deny()`); its quota was not looked at.
 */
export type DecisionReason = 'store-error' | 'timeout' | 'fallback' | 'cached' | 'denied';

/**
 * The store failed to decide: it answered with an error (`store-error`) or not within `timeoutMs`
 * (`timeout`). The failure policy (`onStoreError`) answered instead.
 */
export type StoreFailure = 'store-error' | 'timeout';

/** Whether a decision's `reason` says the store failed (see {@link StoreFailure}). */
export function isStoreFailure(reason: DecisionReason | undefined): reason is StoreFailure {
  return reason === 'store-error' || reason === 'timeout';
}

/** The answer to one request. All durations are whole milliseconds, never negative. */
export interface Decision {
  /** Whether the request may proceed. */
  readonly allowed: boolean;
  /** The most this policy ever grants at once (limit, capacity or burst). */
  readonly limit: number;
  /** Whole units still available after this decision (floor). */
  readonly remaining: number;
  /** Milliseconds until the identifier is back to a full allowance. */
  readonly resetMs: number;
  /** 0 when allowed; otherwise milliseconds until the same request would be allowed. */
  readonly retryAfterMs: number;
  /** Present when the decision did not come from the store as usual. */
  readonly reason?: DecisionReason;
  /** In shadow mode (`enforce: false`), the verdict the limiter would have enforced. */
  readonly wouldAllow?: boolean;
  /**
   * A concurrency policy's acquisition (`limit`) that was allowed: the lease it holds, to give to
   * `release` when the work is done (or to `extend`). Present only when slots were taken; after
   * `extend`, the lease with its new `expiresAt`.
   */
  readonly lease?: Lease;
  /** `release`: whether the lease was live and is now freed; `false` when it had expired or was released before. */
  readonly released?: boolean;
  /** `extend`: whether the lease was live and now lasts longer; `false` when it had expired or was released. */
  readonly extended?: boolean;
  /**
   * Slots of other leases that this call found expired and freed: holders that never released (a
   * crashed or stuck process). Present on a concurrency policy's calls that freed some.
   */
  readonly reclaimed?: number;
  /**
   * On decisions of `charge` (and of a settle that charged): units the identifier owes past its
   * limit after the call, 0 when none. Absent on other decisions.
   */
  readonly debt?: number;
  /**
   * On decisions of `charge` (and of a settle that charged): units of the amount not taken because
   * the debt would have passed the policy's `maxDebt`, 0 when none. Absent on other decisions.
   */
  readonly cutOff?: number;
}

/**
 * A concurrency policy's hold on `cost` slots of one identifier, until released or until it
 * expires (see `concurrency()`).
 */
export interface Lease {
  /** Names the lease to `release` and `extend`: random, unique per acquisition. */
  readonly id: string;
  /**
   * A fencing token: strictly greater than every token issued before for the identifier, in every
   * process, also after the identifier's state expired. Give it to what the lease protects, which
   * refuses work carrying a token lower than one it has seen (a holder paused past its lease).
   */
  readonly token: number;
  /** When the lease lapses unless extended, in ms since the epoch on the store's clock. */
  readonly expiresAt: number;
}

/**
 * What `charge` answers: always `allowed` (the units are taken, past the limit if need be, up to
 * `maxDebt`). `remaining` is 0 while in debt; `retryAfterMs` is how long until a request of cost 1
 * would be allowed (0 when one would be now); `debt` and `cutOff` are always present.
 */
export interface ChargeDecision extends Decision {
  readonly debt: number;
  readonly cutOff: number;
}

/**
 * What a request asks of a policy: take units, look without taking, give units back, take units
 * whether or not they are there (`charge`: usage known after the fact, into debt up to `maxDebt`),
 * take units in the first future slot where they fit (`schedule`, for `wait()`: GCRA and the token
 * bucket), or free or renew a concurrency policy's lease. What each one means to the scripts, the
 * stores and the limiter is one entry of `OPERATIONS` (operations.ts).
 */
export type Operation = 'limit' | 'peek' | 'refund' | 'charge' | 'schedule' | 'release' | 'extend';

/**
 * The rules an algorithm's twin decides by, each one function (a store that runs them elsewhere,
 * such as Redis, implements each by this name). The `budget-*` ones are a region's part of a global
 * budget (see `budget` in createLimiter's options).
 */
export type ScriptName =
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
  readonly name: ScriptName;
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

/** The raw result of a store: a decision without `limit`, which the limiter adds. */
export interface StoreResult {
  readonly allowed: boolean;
  readonly remaining: number;
  readonly resetMs: number;
  readonly retryAfterMs: number;
  /**
   * An operation's own result fields after the decision's, as many as its entry's `fields` (a wait,
   * a lease); absent for limit, peek and refund, whose results carry none.
   */
  readonly fields?: readonly number[] | undefined;
  /**
   * With {@link StoreRequest.storedReads}: the limit stored for the identifier that the decision
   * used, or -1 when the identifier is denied (its quota was not looked at); absent when neither.
   */
  readonly stored?: number | undefined;
}

/** Bits of {@link StoreRequest.storedReads}: what the script reads beside the identifier's state. */
export const STORED_READS = { deny: 1, limit: 2 } as const;

/** One request to a store, already validated. */
export interface StoreRequest {
  readonly policy: Policy;
  /** Limiter name, part of the key. */
  readonly name: string;
  readonly identifier: string;
  /** A hash tag shared with other keys (see `CallOptions.tag`); the identifier's own tag when absent. */
  readonly tag?: string | undefined;
  readonly operation: Operation;
  readonly cost: number;
  /** Milliseconds from the limiter's clock, or `undefined` to let the store read its own. */
  readonly now: number | undefined;
  /**
   * An operation's own arguments after `cost`, as many as its entry's `operands` (a lease id, a
   * longest wait), as its script reads them; absent for limit, peek and refund.
   */
  readonly operands?: readonly string[] | undefined;
  /**
   * What the script reads that an operator stored for the identifier (`LimiterOptions.overrides`),
   * as bits of {@link STORED_READS}: its denial, its limit (applied by the policy's `limitRule`), or
   * both; 0 or absent for neither. A store without stored entries ignores it.
   */
  readonly storedReads?: number | undefined;
}

/**
 * Where a store sends the answers to the requests handed to `submit`: each request's answer or
 * failure once, with the request it answers. Owned by whoever submitted them (the limiter).
 */
export interface StoreReply<R extends StoreRequest = StoreRequest> {
  answered(request: R, result: StoreResult): void;
  failed(request: R, error: unknown): void;
}

/**
 * Requests that one script decides together (see `Store.submit`): every key is looked at, and
 * `limit` takes from each only when all allow. Checked beforehand by the caller: one operation that
 * may be atomic, one `now`, distinct keys of one cluster slot.
 */
export interface AtomicBatch {
  /** The requests' keys in this store (`keyFor`), in request order, computed once by the caller. */
  readonly keys: readonly string[];
}

/** A limiter made on a store, as the store is told of it (Store.attached). */
export interface LimiterDeadline {
  readonly name: string;
  /** How long the limiter waits for the store's answer before its failure policy decides. */
  readonly timeoutMs: number;
}

/** Where state lives. A store decides each request atomically and knows nothing of HTTP. */
export interface Store {
  /** `redis` or `memory`, for logs and hooks. */
  readonly kind: string;
  /**
   * Decides one request atomically. All a store of one's own needs: a limiter hands a store without
   * `submit` its requests one by one through it.
   */
  decide(request: StoreRequest): Promise<StoreResult>;
  /**
   * How a limiter decides: each request on its own (a store may decide those of one tick in one
   * call), or, with `together`, all of them by one script. Answers each request through `reply`,
   * once, possibly before `submit` returns (a store in process does). `requests` is the caller's:
   * read it before returning. Optional: without it, a limiter calls `decide` per request, and an atomic
   * all() of limiters on the store is refused.
   */
  submit?<R extends StoreRequest>(requests: readonly R[], reply: StoreReply<R>, together?: AtomicBatch): void;
  /**
   * Decides at once, for stores that need no I/O (the memory store): the in-process fast path. A
   * limiter calls it for single requests when present, and then needs no timeout.
   */
  decideNow?(request: StoreRequest): StoreResult;
  /**
   * `undefined` when the store can decide now. While its first connection is still being made (and,
   * for Redis, its scripts loaded), a promise that resolves once it is, or rejects (a SluiceError)
   * when the connection cannot be made within the store's connect timeout. The limiter waits for
   * it before its `timeoutMs` starts, so a process that has just started does not answer its first
   * requests with the failure policy.
   */
  untilReady?(): Promise<void> | undefined;
  /**
   * The shard that decides a request (on a cluster, the address of the primary that owns its
   * slot), so that limiters track health per shard: one primary down does not send the other
   * primaries' traffic to the failure policy. Absent or `undefined`: the store is one shard.
   */
  shardOf?(request: StoreRequest): string | undefined;
  /**
   * Told once of each limiter made on this store, with how long it waits for an answer, so that
   * the store can warn of client settings that outlast it. Optional.
   */
  attached?(limiter: LimiterDeadline): void;
  /** Deletes one identifier's state for a limiter. */
  reset(name: string, identifier: string, tag?: string): Promise<void>;
  /**
   * Limits and denials stored per identifier, which decisions read when a request's `storedReads`
   * asks. Optional: a limiter with `overrides` needs a store that has them.
   */
  readonly stored?: StoredEntries;
  /** The key under which an identifier's state is kept, for tools and tests. */
  keyFor(name: string, identifier: string, tag?: string): string;
  /**
   * Runs sluice's scripts that are not decisions (a global budget's ledger) on a server every
   * process reaches. Absent on a store without one (the memory store keeps such state in process).
   */
  readonly scripts?: StoreScripts;
}

/** A store's way to run one of sluice's scripts that is not a decision, atomically over its keys. */
export interface StoreScripts {
  /** Keys are sent together only when this is the same for each: the hash slot on a cluster, else 0. */
  groupOf(key: string): number;
  /**
   * Runs the script `name` over `keys` (all in one group) with `args`, loading it as decisions'
   * scripts are; the reply as the server gave it. Rejects with ERR_SLUICE_STORE.
   */
  run(name: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
}

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

/** Options of `wait()`: those of a call, the longest wait, and a signal that aborts it. */
export interface WaitOptions extends CallOptions {
  /**
   * The longest the call may wait for its slot, in ms, from 0 to 3 600 000 (an hour). A slot
   * further away is refused at once and takes nothing: the decision says `allowed: false`, with
   * the `retryAfterMs` after which the same wait would fit.
   * @default 60000
   */
  readonly maxWaitMs?: number;
  /**
   * Aborts the wait: the promise rejects with the signal's `reason`, and a slot taken and not yet
   * started is given back, so the next call scheduled moves up by one slot.
   * @default undefined
   */
  readonly signal?: AbortSignal;
}

/** What `wait()` resolves with: the decision when the call may go (or its refusal), and how long it waited. */
export interface WaitDecision extends Decision {
  /** Milliseconds from the call of `wait()` to its answer, with fractions. */
  readonly waitedMs: number;
}

/** Options of `charge`: the key's tag and the call's limit, as for `limit`. */
export interface ChargeOptions {
  /** The tag the identifier's calls are made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
  /** This call's quota instead of the policy's own (see {@link CallOptions.limit}). */
  readonly limit?: number;
}

/**
 * A reservation made by `reserve`: the decision for the estimate, and `settle`, which gives back or
 * charges the difference once the actual cost is known. Nothing of it lives in the process but this
 * object: a process that dies before settling leaves the estimate counted.
 */
export interface Reservation {
  /** The decision for the estimate: when not `allowed`, nothing was taken and `settle` does nothing. */
  readonly decision: Decision;
  readonly identifier: string;
  /** The estimate taken (the `cost` reserved). */
  readonly cost: number;
  /** Whether `settle` has been called and recorded. */
  readonly settled: boolean;
  /**
   * Settles the reservation with the actual cost: gives back `cost − actual` when lower (a refund),
   * charges `actual − cost` when higher (into debt if need be, see `Limiter.charge`), does nothing
   * when equal. Once only: a second call rejects with ERR_SLUICE_ALREADY_SETTLED. A refused
   * reservation settles to nothing (its decision, unchanged). A charge the store fails rejects with
   * the store's error and leaves the reservation open, so it may be settled again; a refund the
   * store fails leaves the estimate counted (the decision carries the failure's `reason`).
   */
  settle(actual: number): Promise<Decision>;
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
  /**
   * Waits until the request may go, then resolves with an allowed decision. With `gcra` and
   * `tokenBucket`, one store call takes the first free slot (in the order calls reach the store,
   * across every process) and the call sleeps until it comes; the windows and the log are asked
   * again after their `retryAfterMs`, with jitter. A slot further away than `maxWaitMs` is refused
   * at once, taking nothing. When the store fails, `onStoreError` answers as for `limit`.
   */
  wait(identifier: string, options?: WaitOptions): Promise<WaitDecision>;
  /**
   * Takes `amount` units whether or not they are there: usage known after the work is done (the
   * tokens an answer used, the bytes it served). The identifier may go into debt, up to the
   * policy's `maxDebt`; its next requests are refused until the debt is paid off by the policy's
   * own refill. Never refuses; rejects with the store's error when the store fails (the charge was
   * not recorded, or, after a timeout, may not have been).
   */
  charge(identifier: string, amount: number, options?: ChargeOptions): Promise<ChargeDecision>;
  /**
   * Takes an estimate now (a `limit` of `cost`), and returns it with `settle(actual)`, which gives
   * back the difference or charges it once the real cost is known.
   */
  reserve(identifier: string, options?: CallOptions): Promise<Reservation>;
  /** Forgets the identifier: its next request starts with a full allowance. */
  reset(identifier: string, options?: KeyOptions): Promise<void>;
  /**
   * Frees the slots a concurrency policy's lease holds (see `Decision.lease`). A lease that expired
   * or was released before changes nothing: the decision says `released: false`.
   */
  release(identifier: string, lease: Lease, options?: KeyOptions): Promise<Decision>;
  /**
   * Renews a live lease of a concurrency policy: it lapses `leaseMs` from now (at most, and by
   * default, the policy's own). The decision says `extended: false`, and changes nothing, when the
   * lease had expired or was released.
   */
  extend(identifier: string, lease: Lease, leaseMs?: number, options?: KeyOptions): Promise<Decision>;
  /**
   * Stores a limit for one identifier: its next decision, on every process, uses it instead of the
   * policy's own, as a call's `limit` would (a call's own `limit` still wins). Needs `overrides: true`.
   */
  setLimit(identifier: string, limit: number, options?: StoredLimitOptions): Promise<void>;
  /** The limit stored for an identifier, if any. */
  getLimit(identifier: string, options?: StoredOptions): Promise<StoredLimit | undefined>;
  /** Deletes an identifier's stored limit (the policy's own applies again); whether there was one. */
  clearLimit(identifier: string, options?: StoredOptions): Promise<boolean>;
  /** Every limit stored for this limiter's identifiers. */
  listLimits(): Promise<StoredLimit[]>;
  /**
   * Denies an identifier for `forMs`: its decisions, on every process, refuse it without looking at
   * its quota (`reason: 'denied'`) until the denial ends by itself. Needs `overrides: true`.
   */
  deny(identifier: string, options?: DenyOptions): Promise<void>;
  /** Ends an identifier's denial now; whether it was denied. */
  undeny(identifier: string, options?: StoredOptions): Promise<boolean>;
  /** Every denial of this limiter's identifiers that has not ended. */
  listDenials(): Promise<Denial[]>;
}
