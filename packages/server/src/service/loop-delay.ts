// The event loop's delay by the service's own work, for the overload guard: how long a call read now has waited unread.

/** How often the loop's delay is looked at: a timer this often, late by as much as the loop is behind. */
const TICK_MS = 10;

/**
 * The CPU time this process has used, in ms, all its threads. The loop's delay is counted in it
 * rather than on the wall clock: a process the machine did not run (other processes starving it,
 * a SIGSTOP, a paused VM) is late on the wall clock without having any work of its own to shed.
 */
function processCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** The guard's settings this reads: what counts as behind, for how long, after how many calls. */
export interface LoopDelaySettings {
  readonly waitMs: number;
  readonly burstMs: number;
  readonly min: number;
}

/**
 * Watches the loop with a timer and the process's CPU clock. Of a late tick only the CPU time the
 * process used meanwhile counts, so a machine busy with other processes (or a process stopped
 * and continued) does not read as a loop behind by its own work.
 */
export class LoopDelay {
  readonly #settings: LoopDelaySettings;
  readonly #now: () => number;
  readonly #cpuNow: () => number;
  readonly #timer: ReturnType<typeof setInterval>;
  #lastTickMs: number;
  /** The process's CPU time at the last tick, ms. */
  #lastTickCpuMs: number;
  #lagMs = 0;
  /** Since when the loop has been behind by more than `waitMs`; undefined once it has caught up. */
  #lagSinceMs: number | undefined;
  /** Since when every tick has come within half of `waitMs`; undefined while the loop is behind. */
  #calmSinceMs: number | undefined;
  /** Calls read, ever; and how many had been when the loop fell behind. */
  #arrivals = 0;
  #arrivalsAtLag = 0;

  constructor(settings: LoopDelaySettings, now: () => number, cpuNow: () => number = processCpuMs) {
    this.#settings = settings;
    this.#now = now;
    this.#cpuNow = cpuNow;
    this.#lastTickMs = now();
    this.#lastTickCpuMs = cpuNow();
    this.#timer = setInterval(() => this.#tick(), TICK_MS);
    this.#timer.unref();
  }

  /** How late the last tick was by the process's own work, ms. */
  get lagMs(): number {
    return this.#lagMs;
  }

  /**
   * Counts a call read at `nowMs` and says about how long it waited unread: it arrived during the
   * last turn (half of it on average) or this one (what has passed of it). `thresholdMs`: the
   * least wait that would matter to the caller; below it the CPU clock is not read.
   */
  arrive(nowMs: number, thresholdMs: number): number {
    const turnMs = this.#turnMs(nowMs, thresholdMs);
    const lagMs = Math.max(this.#lagMs, turnMs);
    if (lagMs > this.#settings.waitMs && this.#lagSinceMs === undefined) this.#behindSince(nowMs - lagMs);
    this.#arrivals += 1;
    return turnMs + this.#lagMs / 2;
  }

  /**
   * The loop has been behind by more than `waitMs` for `burstMs` (a burst it would have caught up
   * with by now), while at least `min` calls came: a loop slowed by something else (the start, a
   * collection) is not overload that refusing would cure.
   */
  lagging(nowMs: number): boolean {
    return (
      this.#lagSinceMs !== undefined &&
      nowMs - this.#lagSinceMs >= this.#settings.burstMs &&
      this.#arrivals - this.#arrivalsAtLag >= this.#settings.min
    );
  }

  close(): void {
    clearInterval(this.#timer);
  }

  #behindSince(sinceMs: number): void {
    this.#lagSinceMs = sinceMs;
    this.#arrivalsAtLag = this.#arrivals;
  }

  /**
   * How long the loop's current turn has been at its own work, from the last tick (the timer runs
   * first in a turn). The CPU clock is read only when the wall clock says the answer could matter:
   * below `thresholdMs` the wall time, an upper bound, is as good (a system call per call otherwise).
   */
  #turnMs(nowMs: number, thresholdMs: number): number {
    const wallMs = nowMs - this.#lastTickMs - TICK_MS;
    if (wallMs <= 0) return 0;
    if (wallMs + this.#lagMs / 2 <= thresholdMs) return wallMs;
    return this.#ownDelay(nowMs, this.#cpuNow());
  }

  /** How late the tick is by the process's own work: of the wall time since the last tick, what it ran. */
  #ownDelay(nowMs: number, cpuMs: number): number {
    const ranMs = Math.min(nowMs - this.#lastTickMs, cpuMs - this.#lastTickCpuMs);
    return Math.max(0, ranMs - TICK_MS);
  }

  #tick(): void {
    const nowMs = this.#now();
    const cpuMs = this.#cpuNow();
    this.#lagMs = this.#ownDelay(nowMs, cpuMs);
    this.#lastTickMs = nowMs;
    this.#lastTickCpuMs = cpuMs;
    // Behind past `waitMs` to start with; caught up only once within half of it for a quarter of
    // `burstMs`: under overload, turns that refuse what comes past `waitMs` stay near it, and a
    // loaded loop's turns alternate, a long one reading every socket and a short one with a timer
    // only; neither must read as having caught up.
    const { waitMs, burstMs } = this.#settings;
    if (this.#lagMs > waitMs / 2) this.#calmSinceMs = undefined;
    else this.#calmSinceMs ??= nowMs;
    if (this.#lagMs > waitMs && this.#lagSinceMs === undefined) this.#behindSince(nowMs - this.#lagMs);
    else if (this.#calmSinceMs !== undefined && nowMs - this.#calmSinceMs >= burstMs / 4)
      this.#lagSinceMs = undefined;
  }
}
