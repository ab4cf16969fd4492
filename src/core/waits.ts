// What a limiter asks of its store besides single calls, each within the limiter's deadline:
// calls decided together by one script, and resets.
import { performance } from 'node:perf_hooks';
import type { StoreFailure, StoreReply, StoreRequest, StoreResult } from '../types.js';
import { Deadlines } from './deadlines.js';
import type { Submitter } from './submit.js';

/** Why a group's store call has no results: the failure, and the store's error. */
export interface Unanswered {
  readonly failure: StoreFailure;
  readonly error: unknown;
}

/** The store's results for calls asked together, in order, or why there are none. */
export type TogetherAnswer = StoreResult[] | Unanswered;

/** A limiter's waits on its store that are not single calls; their deadlines share one timer, made at the first. */
export class Waits {
  readonly #target: Submitter;
  readonly #timeoutMs: number;
  #deadlines: Deadlines | undefined;

  constructor(target: Submitter, timeoutMs: number) {
    this.#target = target;
    this.#timeoutMs = timeoutMs;
  }

  #deadlinesFor(): Deadlines {
    this.#deadlines ??= new Deadlines(this.#timeoutMs);
    return this.#deadlines;
  }

  /**
   * Hands the store requests to decide together (see Store.submit) and waits for every answer, or
   * the first failure, or the deadline. Each request's `askedAt` is noted for `storeMs`. `connecting`:
   * the store's first connection, awaited first (a process just started does not fail at once).
   */
  together<R extends StoreRequest & { askedAt: number }>(
    requests: readonly R[],
    keys: readonly string[],
    connecting?: Promise<void>,
  ): Promise<TogetherAnswer> {
    if (connecting !== undefined) {
      return connecting.then(
        () => this.together(requests, keys),
        (error: unknown): Unanswered => ({ failure: 'store-error', error }),
      );
    }
    return new Promise((resolve) => {
      const askedAt = performance.now();
      for (const request of requests) request.askedAt = askedAt;
      const deadlines = this.#deadlinesFor();
      const expire = (): void => resolve({ failure: 'timeout', error: undefined });
      const entry = { deadline: 0, settled: false, expire };
      deadlines.track(entry);
      const results: StoreResult[] = new Array(requests.length);
      let answers = 0;
      const reply: StoreReply<R> = {
        answered: (request, result) => {
          results[requests.indexOf(request)] = result;
          if (++answers === requests.length && deadlines.stop(entry)) resolve(results);
        },
        failed: (_, error) => {
          if (deadlines.stop(entry)) resolve({ failure: 'store-error', error });
        },
      };
      try {
        this.#target.submit(requests, reply, { keys });
      } catch (error) {
        reply.failed(requests[0] as R, error);
      }
    });
  }

  /** Runs a reset within the deadline: resolves, or rejects with the store's error, or with `timedOut()`. */
  reset(start: () => Promise<void>, timedOut: () => unknown): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#deadlinesFor().race(start, resolve, reject, () => reject(timedOut()));
    });
  }
}
