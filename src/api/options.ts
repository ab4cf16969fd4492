// The public options of one call of a limiter (the limiter's own options are in options.ts).

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

/** Options of `charge`: the key's tag and the call's limit, as for `limit`. */
export interface ChargeOptions {
  /** The tag the identifier's calls are made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
  /** This call's quota instead of the policy's own (see {@link CallOptions.limit}). */
  readonly limit?: number;
}

/** Options of `takeUpTo`: the key's tag and the call's limit, as for `limit`. */
export interface TakeOptions {
  /** The tag the identifier's calls are made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
  /** This call's quota instead of the policy's own (see {@link CallOptions.limit}). */
  readonly limit?: number;
}
