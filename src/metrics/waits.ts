// What one limiter's recorder counts of calls waiting for a slot (wait(), throttle()): how many wait now, how long they waited, pauses.
import type { WaitEvent } from '../hooks.js';
import { WAIT_SECONDS_BUCKETS } from './definitions.js';

/** The wait histogram's bounds in ms, as events carry them. */
const WAIT_MS_BUCKETS: readonly number[] = WAIT_SECONDS_BUCKETS.map((s) => s * 1000);

/** A histogram's cumulative counts per upper bound in seconds (the last is `Infinity`), their sum in seconds and count. */
export interface WaitHistogram {
  readonly buckets: ReadonlyArray<{ readonly le: number; readonly count: number }>;
  readonly sum: number;
  readonly count: number;
}

/** Times waited, on the wait histogram's bounds, in plain numbers. */
class WaitTimes {
  /** Waits per bucket (not cumulative); the last one is above the last bound. */
  readonly #buckets = new Float64Array(WAIT_MS_BUCKETS.length + 1);
  #sumMs = 0;

  add(waitedMs: number): void {
    let i = 0;
    while (i < WAIT_MS_BUCKETS.length && waitedMs > (WAIT_MS_BUCKETS[i] as number)) i++;
    this.#buckets[i] = (this.#buckets[i] as number) + 1;
    this.#sumMs += waitedMs;
  }

  histogram(): WaitHistogram {
    let count = 0;
    const buckets = [...WAIT_SECONDS_BUCKETS, Number.POSITIVE_INFINITY].map((le, i) => {
      count += this.#buckets[i] as number;
      return { le, count };
    });
    return { buckets, sum: this.#sumMs / 1000, count };
  }

  clear(): void {
    this.#buckets.fill(0);
    this.#sumMs = 0;
  }
}

/** One limiter's waits, in plain numbers read at scrape time. */
export class WaitTally {
  /** Calls waiting now (began and not yet ended). */
  waiting = 0;
  /** Pauses taken from upstream answers, and their total length in ms. */
  pauses = 0;
  pausedMs = 0;
  /** Allowed waits for a slot. */
  readonly #waits = new WaitTimes();
  /** Throttled calls' waits for a lease of this (concurrency) limiter that ended with one. */
  readonly #leaseWaits = new WaitTimes();

  record(event: WaitEvent): void {
    if (event.kind === 'waiting') {
      this.waiting++;
    } else if (event.kind === 'paused') {
      this.pauses++;
      this.pausedMs += event.pauseMs;
    } else if (event.kind === 'leased') {
      if (event.allowed) this.#leaseWaits.add(event.waitedMs);
    } else {
      this.waiting = Math.max(0, this.waiting - 1);
      if (event.allowed) this.#waits.add(event.waitedMs);
    }
  }

  /** The time allowed waits for a slot took. */
  histogram(): WaitHistogram {
    return this.#waits.histogram();
  }

  /** The time throttled calls waited for a lease of this limiter, those that got one. */
  leaseHistogram(): WaitHistogram {
    return this.#leaseWaits.histogram();
  }

  clear(): void {
    this.pauses = 0;
    this.pausedMs = 0;
    this.#waits.clear();
  }

  clearLeases(): void {
    this.#leaseWaits.clear();
  }
}
