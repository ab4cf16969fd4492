// Gradient2: the limit shrinks as recent latency rises above its long-run average, and grows by a small queue otherwise.
import { type Bounds, clampLimit, type LimitAlgorithm, type LimitWindow } from './limit.js';

/** Parameters of {@link Gradient2Limit}, beside the bounds. */
export interface Gradient2Params {
  /**
   * How much slower than the long-run average recent latency may be before the limit shrinks:
   * 1.25 lets it be 25% slower. It sets how deep the service behind may queue: at the limit it
   * holds about `tolerance` times the requests it can work on at once. Below 1 the limit shrinks
   * on any noise.
   * @default 1.25
   */
  readonly tolerance?: number;
  /**
   * The room added to the limit on each window (`L·gradient + queue`), in requests: it is how the
   * limit probes for more capacity, and the depth of queue it tolerates in the service behind it.
   * @default 4
   */
  readonly queue?: number;
  /**
   * How far each window moves the limit towards its new target, from 0 (not at all) to 1 (all the
   * way). Lower is steadier and slower to follow a change.
   * @default 0.2
   */
  readonly smoothing?: number;
  /**
   * How many windows the long-run latency average spans (an exponential average). Longer
   * remembers a healthy latency through a longer overload.
   * @default 100
   */
  readonly longWindow?: number;
}

/** The defaults of {@link Gradient2Params}. */
export const GRADIENT2_DEFAULTS = { tolerance: 1.25, queue: 4, smoothing: 0.2, longWindow: 100 } as const;

/**
 * The limit from the ratio of two latencies: the long-run average (what this service's latency
 * usually is) over the recent one. While the recent latency is within `tolerance` of the average
 * the gradient is 1 and the limit grows by `queue`; when it is slower, the limit is scaled down by
 * the ratio, by at most half per window so that one slow outlier cannot empty it.
 *
 *   gradient = clamp(tolerance · longRtt / shortRtt, 0.5, 1)
 *   target   = L · gradient + queue
 *   L'       = L · (1 − smoothing) + target · smoothing
 */
export class Gradient2Limit implements LimitAlgorithm {
  readonly name = 'gradient2';
  readonly #bounds: Bounds;
  readonly #params: Required<Gradient2Params>;
  /** The limit as a real number: the whole `limit` is read from it, small steps accumulate in it. */
  #estimate: number;
  /** The long-run latency average, in ms; 0 before the first window. */
  #longRttMs = 0;

  constructor(bounds: Bounds, params: Required<Gradient2Params>) {
    this.#bounds = bounds;
    this.#params = params;
    this.#estimate = bounds.initial;
  }

  get limit(): number {
    return Math.floor(this.#estimate);
  }

  /** The long-run latency average the gradient compares with, in ms (0 before the first window). */
  get longRttMs(): number {
    return this.#longRttMs;
  }

  /**
   * Whether the long-run average takes this window in. Not a window in which requests were
   * refused, with latency above the average: that latency is the queue the limit itself let build, and an
   * average that learnt it would call it normal, and the limit would creep up for as long as the
   * overload lasts. Faster windows, windows that refused nothing, and windows at the `min` bound (where
   * there is no queue of ours to blame, as when the service became slower for good) are taken.
   */
  #learnsFrom(window: LimitWindow): boolean {
    return window.rttMs <= this.#longRttMs || window.refused === 0 || this.#estimate <= this.#bounds.min;
  }

  update(window: LimitWindow): number {
    const { tolerance, queue, smoothing, longWindow } = this.#params;
    const shortRtt = window.rttMs;
    // The first window's fastest request, not its mean: a shedder that starts above the service's
    // capacity has queued the rest of that window already, and an average that began at their
    // latency would call that queue normal for as long as the overload lasts.
    if (this.#longRttMs === 0) this.#longRttMs = window.minRttMs > 0 ? window.minRttMs : shortRtt;
    else if (this.#learnsFrom(window))
      this.#longRttMs += (shortRtt - this.#longRttMs) * (2 / (longWindow + 1));
    // After a long overload the average remembers the slow period; once latency is back to half
    // of it, let it forget faster than the average alone would, or the limit stays high too long.
    if (this.#longRttMs / shortRtt > 2) this.#longRttMs *= 0.95;
    // Half the limit unused: latency says nothing about what more in flight would do.
    if (!window.dropped && window.maxInFlight < this.#estimate / 2) return this.limit;
    const gradient = window.dropped
      ? 0.5
      : Math.max(0.5, Math.min(1, (tolerance * this.#longRttMs) / shortRtt));
    // The queue only while latency is within tolerance: added on every window, it would outgrow a
    // gradient a little under 1 and the limit would creep up under a steady, modest overload.
    const target = this.#estimate * gradient + (gradient === 1 ? queue : 0);
    this.#estimate = clampLimit(this.#estimate * (1 - smoothing) + target * smoothing, this.#bounds);
    return this.limit;
  }
}
