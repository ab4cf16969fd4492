// A concurrency lease held while a throttled call runs: taken after its rate slot, renewed while it runs, released when it settles.
import { performance } from 'node:perf_hooks';
import type { Pipeline } from '../core/index.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { Lease, Limiter } from '../types.js';

/**
 * The slots of a concurrency limiter, as one throttle takes them. A call that finds none free
 * sleeps until the soonest lease lapses (its `retryAfterMs`), or until a call of this throttle
 * on the same key releases one, whichever comes first: a release by another process is seen
 * when that lease would have lapsed, or at the call's next try.
 */
export class Concurrency {
  readonly #limiter: Limiter;
  /** The limiter's pipeline: its recorders hear how long each call waited for a lease. */
  readonly #pipeline: Pipeline;
  /** Renewals every half lease: a call that runs longer than its lease keeps its slot. */
  readonly #renewEveryMs: number;
  /** Calls waiting for a slot, by key: woken when this throttle releases one there. */
  readonly #waiting = new Map<string, Set<() => void>>();

  constructor(limiter: Limiter, pipeline: Pipeline, leaseMs: number) {
    this.#limiter = limiter;
    this.#pipeline = pipeline;
    this.#renewEveryMs = Math.max(1, Math.floor(leaseMs / 2));
  }

  /**
   * Runs `fn` holding a slot of `key`: waits for one up to `maxWaitMs` (then rejects with
   * `ERR_SLUICE_MAX_WAIT`, `fn` not called) or until `signal` aborts, renews it while `fn` runs,
   * and releases it when `fn` settles, returned or thrown.
   */
  async hold<T>(
    key: string,
    fn: () => T | PromiseLike<T>,
    maxWaitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    let lease = await this.#acquire(key, maxWaitMs, signal);
    // A store that failed open (`onStoreError: 'allow'`) lets the call go with no lease to hold.
    if (lease === undefined) return fn();
    const renewal = setInterval(() => {
      const held = lease as Lease;
      this.#limiter.extend(key, held).then(
        (decision) => {
          if (decision.lease !== undefined && lease === held) lease = decision.lease;
        },
        // A renewal that fails leaves the lease to lapse at its time: the next one may succeed.
        () => undefined,
      );
    }, this.#renewEveryMs);
    renewal.unref();
    try {
      return await fn();
    } finally {
      clearInterval(renewal);
      await this.#limiter.release(key, lease).catch(() => undefined);
      for (const wake of this.#waiting.get(key) ?? []) wake();
    }
  }

  /** A lease on one slot of `key`, asked again as slots may come back, within `maxWaitMs`. */
  async #acquire(
    key: string,
    maxWaitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Lease | undefined> {
    const startedAt = performance.now();
    let allowed = false;
    try {
      for (;;) {
        signal?.throwIfAborted();
        const decision = await this.#limiter.limit(key);
        if (decision.allowed) {
          allowed = true;
          return decision.lease;
        }
        const leftMs = maxWaitMs - (performance.now() - startedAt);
        if (leftMs <= 0) {
          throw new SluiceError(
            ERROR_CODES.MAX_WAIT,
            `The call waited \`maxWaitMs\` (${maxWaitMs} ms) for a slot of its \`concurrency\` limiter: it was not made.`,
          );
        }
        await this.#sleep(key, Math.min(leftMs, Math.max(1, decision.retryAfterMs)), signal);
      }
    } finally {
      this.#pipeline.waited({ kind: 'leased', waitedMs: performance.now() - startedAt, allowed });
    }
  }

  /** Resolves after `ms`, or when this throttle releases a slot of `key`; rejects when `signal` aborts. */
  #sleep(key: string, ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiters = this.#waiting.get(key) ?? new Set<() => void>();
      this.#waiting.set(key, waiters);
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', aborted);
        waiters.delete(wake);
        if (waiters.size === 0 && this.#waiting.get(key) === waiters) this.#waiting.delete(key);
      };
      const wake = (): void => {
        done();
        resolve();
      };
      const aborted = (): void => {
        done();
        reject(signal?.reason);
      };
      const timer = setTimeout(wake, ms);
      waiters.add(wake);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }
}
