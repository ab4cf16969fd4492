// The one interface every limit algorithm implements: a window of latency samples in, a concurrency limit out.

/**
 * What the shedder saw during one sampling window: the requests that ended in it, the mean of their
 * latencies, the most requests in flight at once, and whether any of them failed for overload.
 */
export interface LimitWindow {
  /** Requests that ended in the window (at least one). */
  readonly samples: number;
  /** Mean latency of those requests, in ms: from the ticket's grant to its release. */
  readonly rttMs: number;
  /** The least latency among them, in ms. */
  readonly minRttMs: number;
  /** The most tickets in flight at once during the window. */
  readonly maxInFlight: number;
  /** Requests refused during the window (the limit was binding). */
  readonly refused: number;
  /** Whether any of them was released with `dropped: true` (a timeout, a 503 from downstream). */
  readonly dropped: boolean;
}

/**
 * A concurrency limit that follows latency. Pure: it reads no clock and does no I/O, so a test
 * feeds it windows and asserts the limit it answers.
 */
export interface LimitAlgorithm {
  /** The algorithm's name, as `limit` names it: 'gradient2', 'vegas' or 'aimd'. */
  readonly name: string;
  /** The limit now: a whole number from the algorithm's `min` to its `max`. */
  readonly limit: number;
  /** Learns from one window and answers the new limit. */
  update(window: LimitWindow): number;
}

/** The bounds every algorithm takes. */
export interface LimitBounds {
  /**
   * The limit before any latency has been seen.
   * @default 20
   */
  readonly initial?: number;
  /**
   * The limit never goes below this. At least 1: with a limit of 0 nothing would run, and nothing
   * would tell the algorithm that latency came back down.
   * @default 1
   */
  readonly min?: number;
  /**
   * The limit never goes above this.
   * @default 1000
   */
  readonly max?: number;
}

/** The defaults of {@link LimitBounds}. */
export const BOUNDS_DEFAULTS = { initial: 20, min: 1, max: 1000 } as const;

/** Bounds after defaults and checks: `min <= initial <= max`. */
export interface Bounds {
  readonly initial: number;
  readonly min: number;
  readonly max: number;
}

/** Keeps `value` within the bounds. */
export function clampLimit(value: number, bounds: Bounds): number {
  return Math.min(bounds.max, Math.max(bounds.min, value));
}
