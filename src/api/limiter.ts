// The public limiter: what users call.
import type { Policy } from '../algorithms/contract.js';
import type { Denial, DenyOptions, StoredLimit, StoredLimitOptions, StoredOptions } from '../stored-types.js';
import type { Store } from '../stores/contract.js';
import type {
  ChargeDecision,
  Decision,
  Lease,
  LimitDecision,
  LookDecision,
  TakeDecision,
  WaitDecision,
} from './decision.js';
import type { CallOptions, ChargeOptions, KeyOptions, TakeOptions, WaitOptions } from './options.js';

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
  limit(identifier: string, options?: CallOptions): Promise<LimitDecision>;
  /** The decision `limit` would give, consuming nothing. `remaining` is what is left now. */
  peek(identifier: string, options?: CallOptions): Promise<LookDecision>;
  /** Gives back `amount` units (at most what is in use), e.g. for a request that turned out free. */
  refund(identifier: string, amount?: number, options?: KeyOptions): Promise<LookDecision>;
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
   * Takes as many units as are free, up to `n` (at least 1), or refuses and takes nothing: for a
   * worker pulling up to `n` jobs, or a bulk request served in part. `granted` says how many were
   * taken (0 when refused); `retryAfterMs`, when refused, is how long until one unit is free. Every
   * policy but `concurrency()` and a global budget's. Options as for `limit` (but `cost`).
   *
   * @example
   * const { granted } = await limiter.takeUpTo('worker-7', 50);
   * const jobs = await queue.pull(granted);
   */
  takeUpTo(identifier: string, n: number, options?: TakeOptions): Promise<TakeDecision>;
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
