// Vegas: estimates the queue in the service behind from the latency above its no-load latency, and keeps it short.
import { type Bounds, clampLimit, type LimitAlgorithm, type LimitWindow } from './limit.js';

/** Parameters of {@link VegasLimit}, beside the bounds. */
export interface VegasParams {
  /**
   * Below this estimated queue (times log10 of the limit) the limit grows by one step.
   * @default 3
   */
  readonly alpha?: number;
  /**
   * Above this estimated queue (times log10 of the limit) the limit shrinks by one step.
   * @default 6
   */
  readonly beta?: number;
  /**
   * How many windows pass before the no-load latency is measured again (taken from the next
   * window), so that a service that became slower for good is not held to its old speed.
   * @default 600
   */
  readonly probeWindows?: number;
  /**
   * How far each window moves the limit towards its new target, from 0 to 1.
   * @default 1
   */
  readonly smoothing?: number;
}

/** The defaults of {@link VegasParams}. */
export const VEGAS_DEFAULTS = { alpha: 3, beta: 6, probeWindows: 600, smoothing: 1 } as const;

/**
 * TCP Vegas applied to requests: with `noLoadRtt` the least latency seen, the requests waiting
 * in the service behind are about `queue = L · (1 − noLoadRtt / rtt)`. Steps scale with log10(L),
 * so a large limit moves faster than a small one:
 *
 *   queue ≤ log10(L)        L' = L + beta·log10(L)   (hardly any queue: grow fast)
 *   queue < alpha·log10(L)  L' = L + log10(L)
 *   queue > beta·log10(L)   L' = L − log10(L)
 *   a dropped request       L' = L − log10(L)
 */
export class VegasLimit implements LimitAlgorithm {
  readonly name = 'vegas';
  readonly #bounds: Bounds;
  readonly #params: Required<VegasParams>;
  #estimate: number;
  /** The least latency seen since the last probe, in ms; 0 before the first window. */
  #noLoadRttMs = 0;
  #windowsSinceProbe = 0;

  constructor(bounds: Bounds, params: Required<VegasParams>) {
    this.#bounds = bounds;
    this.#params = params;
    this.#estimate = bounds.initial;
  }

  get limit(): number {
    return Math.floor(this.#estimate);
  }

  /** The no-load latency the queue is estimated against, in ms (0 before the first window). */
  get noLoadRttMs(): number {
    return this.#noLoadRttMs;
  }

  update(window: LimitWindow): number {
    const { alpha, beta, probeWindows, smoothing } = this.#params;
    this.#windowsSinceProbe += 1;
    if (this.#windowsSinceProbe > probeWindows) {
      this.#windowsSinceProbe = 0;
      this.#noLoadRttMs = 0;
    }
    if (this.#noLoadRttMs === 0 || window.minRttMs < this.#noLoadRttMs) this.#noLoadRttMs = window.minRttMs;
    const limit = this.#estimate;
    // log10 of a limit below 10 would be a step under one request: small limits move by one.
    const step = Math.max(1, Math.log10(limit));
    let target: number;
    if (window.dropped) target = limit - step;
    else if (window.maxInFlight < limit / 2) return this.limit;
    else {
      const queue = Math.ceil(limit * (1 - this.#noLoadRttMs / window.rttMs));
      if (queue <= step) target = limit + beta * step;
      else if (queue < alpha * step) target = limit + step;
      else if (queue > beta * step) target = limit - step;
      else return this.limit;
    }
    this.#estimate = clampLimit(limit * (1 - smoothing) + target * smoothing, this.#bounds);
    return this.limit;
  }
}
