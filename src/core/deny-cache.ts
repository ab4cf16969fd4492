// Denials remembered in process, so a client hammering past its limit costs no round trip until it may retry.

/**
 * What one remembered denial says: any request of at least `cost`, under a limit of at most
 * `limit`, is denied until `until`.
 */
interface Denial {
  readonly cost: number;
  readonly limit: number;
  readonly until: number;
  readonly resetAt: number;
  readonly remaining: number;
}

/** What `lookup` answers from: the decision fields of a denial, without `reason`. */
export interface CachedDenial {
  readonly remaining: number;
  readonly resetMs: number;
  readonly retryAfterMs: number;
}

/**
 * The cache key of an identifier (and its tag, if the call named one), one-to-one: an untagged
 * identifier is its own key unless it starts with NUL, which marks the escaped forms.
 */
function keyOf(identifier: string, tag: string | undefined): string {
  if (tag !== undefined) return `\u0000${JSON.stringify([tag, identifier])}`;
  return identifier.charCodeAt(0) === 0 ? `\u0000${JSON.stringify([identifier])}` : identifier;
}

/**
 * A bounded LRU of the store's denials, per identifier (and tag). A denial of cost `c` with `retryAfterMs` `r`
 * answers, until `r` has passed, only requests of cost `c` or more: the policies are monotone in cost
 * (more units are never granted sooner than fewer), and what other requests consume meanwhile only
 * pushes the retry later. A smaller request still goes to the store, which may grant it, and so
 * does a request made under a larger per-call limit (a plan upgraded).
 *
 * Answers are never later than the store's: the wait is counted from before the store decided,
 * and a request under a smaller limit than the denial's would wait at least as long.
 *
 * @example
 * const cache = new DenyCache(10_000);
 * cache.remember('client-42', undefined, 5, 100, denied, startedAt, cache.epoch);
 * cache.lookup('client-42', undefined, 1, 100, now); // undefined: a cost-1 request may still fit
 */
export class DenyCache {
  readonly maxEntries: number;
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  readonly #entries = new Map<string, Denial>();
  #epoch = 0;

  constructor(maxEntries: number) {
    this.maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * Moves on with every `forget`. A call reads it when it starts and hands it to `remember`, so a
   * denial decided before a refund or reset is not remembered after it.
   */
  get epoch(): number {
    return this.#epoch;
  }

  /**
   * Remembers a denial decided for a call that started at `at` (so the wait is counted from before
   * the store decided, never after: the cache may let a request through early, never hold it late).
   */
  remember(
    identifier: string,
    tag: string | undefined,
    cost: number,
    limit: number,
    decision: { readonly remaining: number; readonly resetMs: number; readonly retryAfterMs: number },
    at: number,
    epoch: number,
  ): void {
    if (decision.retryAfterMs <= 0 || epoch !== this.#epoch) return;
    const entries = this.#entries;
    const key = keyOf(identifier, tag);
    entries.delete(key);
    entries.set(key, {
      cost,
      limit,
      until: at + decision.retryAfterMs,
      resetAt: at + decision.resetMs,
      remaining: decision.remaining,
    });
    if (entries.size > this.maxEntries) {
      const oldest = entries.keys().next();
      if (oldest.done !== true) entries.delete(oldest.value);
    }
  }

  /** The cached denial that answers a request of `cost` under `limit` at `now`, if any. */
  lookup(
    identifier: string,
    tag: string | undefined,
    cost: number,
    limit: number,
    now: number,
  ): CachedDenial | undefined {
    const entries = this.#entries;
    const key = keyOf(identifier, tag);
    const denial = entries.get(key);
    if (denial === undefined) return undefined;
    if (denial.until <= now) {
      entries.delete(key);
      return undefined;
    }
    if (cost < denial.cost || limit > denial.limit) return undefined;
    entries.delete(key);
    entries.set(key, denial);
    const resetMs = Math.ceil(denial.resetAt - now);
    return {
      remaining: denial.remaining,
      resetMs: Math.max(resetMs, 0),
      retryAfterMs: Math.ceil(denial.until - now),
    };
  }

  /** Drops what is known of an identifier (after a refund or reset, which may grant more). */
  forget(identifier: string, tag: string | undefined): void {
    this.#epoch++;
    this.#entries.delete(keyOf(identifier, tag));
  }
}
