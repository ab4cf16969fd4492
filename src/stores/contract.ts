// The store contract: what a limiter hands a store and what it gets back. Every store (memory, Redis, one's
// own) implements `Store`; the limiter knows stores only through it.
import type { Operation, Policy, RuleName } from '../algorithms/contract.js';
import type { StoredEntries } from '../stored-types.js';

/** The name a store that decides elsewhere (Redis) runs a policy's rule by: its {@link RuleName}. */
export type ScriptName = RuleName;

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
