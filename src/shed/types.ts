// What a shedder answers: a ticket or a refusal, its counts, and the shape a metrics recorder reads.

/** A granted request's ticket: release it once the work is done. */
export interface Ticket {
  readonly allowed: true;
  /** The class it was granted under. */
  readonly priority: string;
  /**
   * Gives the ticket back and records the latency since it was granted. `dropped: true` when the
   * work failed for overload (a timeout, a 503 from downstream): the limit then shrinks. A second
   * call does nothing. Call it on the ticket (`ticket.release()`), not detached.
   */
  release(options?: ReleaseOptions): void;
}

/** Options of {@link Ticket.release}. */
export interface ReleaseOptions {
  /**
   * The work failed for overload: timed out, or refused by what it called.
   * @default false
   */
  readonly dropped?: boolean;
}

/** A refused request: nothing was taken. */
export interface Refusal {
  readonly allowed: false;
  /** The class it asked under. */
  readonly priority: string;
  /** When to try again, in ms. */
  readonly retryAfterMs: number;
}

/** What `acquire` answers. */
export type Admission = Ticket | Refusal;

/** Options of `acquire` and `run`. */
export interface AcquireOptions {
  /**
   * The request's class, one of the shedder's `priorities`.
   * @default the shedder's `defaultPriority`
   */
  readonly priority?: string | undefined;
}

/** One class's counts since the shedder was made (in flight and queued: now). */
export interface PriorityStats {
  readonly inFlight: number;
  readonly queued: number;
  readonly admitted: number;
  readonly refused: number;
  readonly dropped: number;
}

/** A shedder's state at one moment. */
export interface ShedderStats {
  readonly name: string;
  readonly algorithm: string;
  readonly limit: number;
  readonly inFlight: number;
  readonly queued: number;
  /** The mean latency of the last window, in ms (0 before the first). */
  readonly latencyMs: number;
  /** By class, most important first. */
  readonly priorities: Readonly<Record<string, PriorityStats>>;
}

/** What a metrics recorder reads from a shedder it tracks, when it is scraped. */
export interface ShedderView {
  readonly name: string;
  stats(): ShedderStats;
}

/**
 * A recorder the shedder registers itself with (`createShedder({ metrics })`): it reads the
 * shedder's counts when scraped, so the shedder pays nothing per request for being watched.
 */
export interface ShedMetricsRecorder {
  track(shedder: ShedderView): void;
}
