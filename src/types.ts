// The words every other file speaks: decisions, policies, the pure twins' contract, and stores.

/** Why a decision was not made by the store in the ordinary way. Absent when the store decided. */
export type DecisionReason = 'store-error' | 'timeout' | 'fallback' | 'cached';

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
}

/** What a request asks of a policy: take units, look without taking, or give units back. */
export type Operation = 'limit' | 'peek' | 'refund';

/** The wire code of each operation, shared by the Lua scripts (ARGV[1]) and the twins. */
export const OPERATION_CODE: Readonly<Record<Operation, string>> = { limit: '0', peek: '1', refund: '2' };

/** The algorithm names, also the names of the Lua scripts (`src/algorithms/<name>.lua`). */
export type ScriptName = 'fixed-window' | 'sliding-log' | 'sliding-window' | 'gcra';

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
}

/**
 * A policy: one algorithm with its parameters. The memory store runs `decide`; the Redis store
 * runs the script named `script` with `args`. Both implement the same rule.
 */
export interface Policy<S = unknown> {
  /** Algorithm name as users wrote it, e.g. `tokenBucket`. */
  readonly algorithm: string;
  /** The Lua script that implements `decide` on Redis. */
  readonly script: ScriptName;
  /** Script parameters after op and time (ARGV[3..]); numbers as Redis should read them. */
  readonly args: readonly string[];
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
   * The pure twin of the script. `state` is what the previous call returned, which the built-in
   * twins update in place and return (the log is large; the windows' small objects would otherwise
   * be replaced on every request); `now` is in milliseconds.
   */
  decide(state: S | undefined, now: number, operation: Operation, cost: number): Outcome<S>;
  /**
   * The same policy with a quota of `limit` units instead of its own, for one call (plans, tenants):
   * the windows' and the log's `limit`; GCRA's rate with its burst scaled alike; the token bucket's
   * capacity and refill rate scaled alike. The same object for the same `limit` (stores batch by
   * policy). Validated by the limiter beforehand: a positive safe integer (at most 1000 for the log).
   */
  withLimit?(limit: number): Policy<S>;
}

/** The raw result of a store: a decision without `limit`, which the limiter adds. */
export interface StoreResult {
  readonly allowed: boolean;
  readonly remaining: number;
  readonly resetMs: number;
  readonly retryAfterMs: number;
}

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
}

/** A request a store answers by calling it back, without a promise of its own (see Store.enqueue). */
export interface QueuedRequest extends StoreRequest {
  /** The store's result. */
  answer(result: StoreResult): void;
  /** The store's failure. */
  fail(error: unknown): void;
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
  /** Decides one request atomically. */
  decide(request: StoreRequest): Promise<StoreResult>;
  /**
   * `decide` without a promise: the store calls `request.answer` or `request.fail`, once. Optional;
   * the limiter uses it when present (a promise and its callbacks per decision add up).
   */
  enqueue?(request: QueuedRequest): void;
  /**
   * Decides at once, for stores that need no I/O (the memory store). A limiter calls it instead of
   * `decide` when present, and then needs no timeout.
   */
  decideNow?(request: StoreRequest): StoreResult;
  /**
   * Decides several requests (one key each, every key of one cluster slot) together and atomically:
   * `limit` takes from every key only when every key allows, so a denial takes nothing anywhere.
   * All requests have the same operation (`limit` or `peek`) and the same `now`. Results are in
   * request order. Rejects with ERR_SLUICE_CROSS_SLOT, writing nothing, when the keys' slots differ.
   * Optional: `all()` combines limiters on a store without it one by one, with refunds.
   */
  decideAll?(requests: readonly StoreRequest[]): Promise<StoreResult[]>;
  /** `decideAll` at once, for stores that need no I/O; throws what `decideAll` rejects with. */
  decideAllNow?(requests: readonly StoreRequest[]): StoreResult[];
  /**
   * `undefined` when the store can decide now. While its first connection is still being made, a
   * promise that resolves once it is made, or rejects (a SluiceError) when it cannot be within the
   * store's connect timeout. The limiter waits for it before its `timeoutMs` starts, so a process
   * that has just started does not answer its first requests with the failure policy.
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
  /** The key under which an identifier's state is kept, for tools and tests. */
  keyFor(name: string, identifier: string, tag?: string): string;
}
