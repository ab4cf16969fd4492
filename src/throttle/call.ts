// One throttled call: waits in its lane for a slot, runs, and learns from the upstream's answer (pause, retry).
import { performance } from 'node:perf_hooks';
import type { Pipeline, Slot } from '../core/index.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import { MAX_PAUSE_MS } from '../operations.js';
import type { Lane, LaneWaiter } from './lane.js';
import type { Concurrency } from './lease.js';
import { answerOf, pauseOf } from './upstream.js';

/** What a call is run with, resolved by its throttle. */
export interface CallSettings {
  readonly pipeline: Pipeline;
  readonly lane: Lane;
  /** The identifier the call is counted under, by its rate limiter and its concurrency limiter. */
  readonly key: string;
  /** Slots held while the call runs, when the throttle has a `concurrency` limiter. */
  readonly concurrency: Concurrency | undefined;
  readonly maxWaitMs: number;
  /** Tries after the upstream refused the call (429, 503). */
  readonly retries: number;
  readonly priority: number;
  readonly signal: AbortSignal | undefined;
}

/**
 * A call on its way: queued in its lane until a slot comes (`go`), then run; an upstream that
 * refuses it with a pause pauses the key for every process and the call is queued again, keeping
 * its turn, up to `retries` times. Settles its promise once.
 */
export class ThrottledCall<T> implements LaneWaiter {
  readonly priority: number;
  seq = 0;
  gone = false;
  readonly #settings: CallSettings;
  readonly #fn: () => T | PromiseLike<T>;
  readonly #resolve: (value: T) => void;
  readonly #reject: (error: unknown) => void;
  #tries = 0;
  #queuedAt = 0;
  #deadline: NodeJS.Timeout | undefined;
  #settled = false;
  /**
   * The upstream's last refusal (429, 503) while the call waits to be made again: what the call
   * answers, as it came, if it is not made again (no slot in time).
   */
  #refused: { readonly value: unknown; readonly threw: boolean } | undefined;

  constructor(
    settings: CallSettings,
    fn: () => T | PromiseLike<T>,
    resolve: (value: T) => void,
    reject: (error: unknown) => void,
  ) {
    this.#settings = settings;
    this.priority = settings.priority;
    this.#fn = fn;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  /** Queues the call (again, after a refusal, with its turn kept and the upstream's pause to write). */
  queue(again: boolean, pauseMs = 0): void {
    const { lane, maxWaitMs, signal, pipeline } = this.#settings;
    this.#queuedAt = performance.now();
    pipeline.waited({ kind: 'waiting' });
    this.#deadline = setTimeout(() => this.#leave(this.#timedOut()), maxWaitMs);
    if (!again) signal?.addEventListener('abort', this.#aborted, { once: true });
    if (again) lane.requeue(this, pauseMs);
    else lane.enqueue(this);
  }

  go(slot: Slot): void {
    const { concurrency, key, maxWaitMs, signal } = this.#settings;
    // What is left of `maxWaitMs` after the wait for the rate slot is the wait for a concurrency slot.
    const leftMs = maxWaitMs - (performance.now() - this.#queuedAt);
    this.#waited(true);
    if (signal?.aborted === true) {
      void slot.giveBack();
      this.#leaveRefused();
      this.#finish(false, signal.reason);
      return;
    }
    this.#tries++;
    this.#leaveRefused();
    let made = false;
    const fn = (): T | PromiseLike<T> => {
      made = true;
      return this.#fn();
    };
    Promise.resolve()
      .then(() => (concurrency === undefined ? fn() : concurrency.hold(key, fn, leftMs, signal)))
      .then(
        (value) => this.#answered(value, false),
        (error: unknown) => {
          // No concurrency slot came (out of time, aborted): the rate slot was not used.
          if (!made) void slot.giveBack();
          this.#answered(error, true);
        },
      );
  }

  refuse(error: SluiceError): void {
    this.#waited(false);
    this.#endWaiting(error);
  }

  readonly #aborted = (): void => {
    if (!this.gone) {
      this.#leaveRefused();
      this.#leave((this.#settings.signal as AbortSignal).reason);
    }
  };

  /** Leaves the queue before a slot came (aborted, out of time). */
  #leave(reason: unknown): void {
    this.#settings.lane.cancel(this);
    this.#waited(false);
    this.#endWaiting(reason);
  }

  /**
   * The wait ended without a slot: a call already made answers what the upstream answered it, as it
   * came; one never made rejects with `reason`.
   */
  #endWaiting(reason: unknown): void {
    const refused = this.#refused;
    this.#refused = undefined;
    if (refused === undefined) this.#finish(false, reason);
    else this.#finish(!refused.threw, refused.value);
  }

  /** The upstream's refusal kept for the call will not be its answer: its body is let go. */
  #leaveRefused(): void {
    const refused = this.#refused;
    this.#refused = undefined;
    if (refused !== undefined) void discard(refused.value);
  }

  #timedOut(): SluiceError {
    return new SluiceError(
      ERROR_CODES.MAX_WAIT,
      `The call waited \`maxWaitMs\` (${this.#settings.maxWaitMs} ms) without a slot: it was not made.`,
    );
  }

  /** The end of a wait in the queue: no more deadline, and the recorders hear how it ended. */
  #waited(allowed: boolean): void {
    if (this.#deadline !== undefined) clearTimeout(this.#deadline);
    this.#deadline = undefined;
    const waitedMs = performance.now() - this.#queuedAt;
    this.#settings.pipeline.waited({ kind: 'done', waitedMs, allowed });
  }

  /** What the call returned or threw: the upstream's pause is shared, and a refused call tried again. */
  #answered(value: unknown, threw: boolean): void {
    const answer = answerOf(value);
    const pause = answer === undefined ? undefined : pauseOf(answer, Date.now());
    const { lane, retries, signal } = this.#settings;
    const again = pause?.refused === true && this.#tries <= retries && signal?.aborted !== true;
    const pauseMs = pause === undefined ? 0 : Math.min(pause.pauseMs, MAX_PAUSE_MS);
    if (again) {
      // The refused answer is kept until the call is made again (then its body is let go: it would
      // hold the connection), and answers if no slot comes in time. The call keeps its turn: the
      // store call that writes the pause takes its slot too.
      this.#refused = { value, threw };
      this.queue(true, pauseMs);
      return;
    }
    if (pauseMs > 0) lane.pause(pauseMs);
    this.#finish(!threw, value);
  }

  #finish(fulfilled: boolean, value: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#settings.signal?.removeEventListener('abort', this.#aborted);
    if (fulfilled) this.#resolve(value as T);
    else this.#reject(value);
  }
}

/** Cancels a fetch Response's body, if the value is one with a body not yet read. */
async function discard(value: unknown): Promise<void> {
  const body = (value as { body?: unknown; bodyUsed?: unknown } | null)?.body;
  if (body instanceof ReadableStream && (value as { bodyUsed?: boolean }).bodyUsed !== true) {
    await body.cancel().catch(() => undefined);
  }
}
