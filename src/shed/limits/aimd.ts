// AIMD: one more request per busy window while nothing fails, a cut by a ratio when something does.
import { type Bounds, clampLimit, type LimitAlgorithm, type LimitWindow } from './limit.js';

/** Parameters of {@link AimdLimit}, beside the bounds. */
export interface AimdParams {
  /**
   * What the limit is multiplied by after a window with a dropped request (or one slower than
   * `timeoutMs`), from 0.5 to 1 (excluded).
   * @default 0.9
   */
  readonly backoffRatio?: number;
  /**
   * A window whose mean latency is above this counts as a drop, in ms: the requests behind it
   * were as good as timed out.
   * @default 5000
   */
  readonly timeoutMs?: number;
}

/** The defaults of {@link AimdParams}. */
export const AIMD_DEFAULTS = { backoffRatio: 0.9, timeoutMs: 5000 } as const;

/**
 * Additive increase, multiplicative decrease, as TCP's congestion window: it reads latency only
 * against `timeoutMs`, so it suits services that fail fast when overloaded (503s, timeouts)
 * rather than slow down.
 *
 *   a drop                 L' = L · backoffRatio
 *   busy (in flight ≥ L/2) L' = L + 1
 */
export class AimdLimit implements LimitAlgorithm {
  readonly name = 'aimd';
  readonly #bounds: Bounds;
  readonly #params: Required<AimdParams>;
  #estimate: number;

  constructor(bounds: Bounds, params: Required<AimdParams>) {
    this.#bounds = bounds;
    this.#params = params;
    this.#estimate = bounds.initial;
  }

  get limit(): number {
    return Math.floor(this.#estimate);
  }

  update(window: LimitWindow): number {
    const { backoffRatio, timeoutMs } = this.#params;
    if (window.dropped || window.rttMs > timeoutMs) {
      this.#estimate = clampLimit(this.#estimate * backoffRatio, this.#bounds);
    } else if (window.maxInFlight >= this.#estimate / 2) {
      this.#estimate = clampLimit(this.#estimate + 1, this.#bounds);
    }
    return this.limit;
  }
}
