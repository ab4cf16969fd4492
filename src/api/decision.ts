// The public answers: what a call of a limiter resolves with.

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

/** What `wait()` resolves with: the decision when the call may go (or its refusal), and how long it waited. */
export interface WaitDecision extends Decision {
  /** Milliseconds from the call of `wait()` to its answer, with fractions. */
  readonly waitedMs: number;
}

/**
 * What `takeUpTo` answers: the decision, and how many units it took. Allowed when at least one unit
 * was free; `remaining` is what is left after the grant.
 */
export interface TakeDecision extends Decision {
  /** Units taken, from 1 to `n` when allowed; 0 when refused (nothing was taken). */
  readonly granted: number;
}

/**
 * What `limit` answers: a decision, with the lease (and the slots it reclaimed) when a concurrency
 * policy's acquisition was allowed. It never carries a charge's or a lease operation's fields.
 */
export type LimitDecision = Omit<Decision, 'debt' | 'cutOff' | 'released' | 'extended'>;

/** What `peek` and `refund` answer: a decision, with the slots a concurrency policy's call reclaimed. */
export type LookDecision = Omit<Decision, 'debt' | 'cutOff' | 'released' | 'extended' | 'lease'>;
