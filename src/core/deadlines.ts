// One timer for every call in flight. A limiter's calls all wait the same `timeoutMs`, so their
// deadlines come in the order the calls were made: only the earliest needs a timer, and a call
// allocates none.
import { performance } from 'node:perf_hooks';

/** A call that may run out of time; the pipeline's calls are their own entries (no allocation per call). */
export interface Expiring {
  deadline: number;
  settled: boolean;
  /** Called once the deadline has passed and the call is still unsettled. */
  expire(): void;
}

/**
 * A FIFO of deadlines, swept by a single timer armed for the earliest one. Settled calls stay in
 * the queue until the sweep passes them, which costs a slot, not a timer. The timer keeps the
 * process alive only while some call is unsettled: a caller awaiting a decision is work in
 * progress, but a process whose calls are all answered must not linger until the next sweep.
 *
 * @example
 * const deadlines = new Deadlines(50);
 * deadlines.race(() => store.decide(request), onAnswer, onError, onTimeout); // exactly one runs
 */
export class Deadlines {
  readonly timeoutMs: number;
  /** Timers armed so far: at most one per sweep, not one per call. For tests. */
  timersArmed = 0;
  #queue: Expiring[] = [];
  #head = 0;
  #unsettled = 0;
  #timer: NodeJS.Timeout | undefined;
  #sweeping = false;

  constructor(timeoutMs: number) {
    this.timeoutMs = timeoutMs;
  }

  /** Calls started and not yet answered, failed or expired. */
  get pending(): number {
    return this.#unsettled;
  }

  /**
   * Starts `start()` against a deadline; exactly one of the callbacks runs, whichever comes first.
   * What the promise settles with after the deadline is dropped (and a late rejection is handled).
   */
  race<T>(
    start: () => Promise<T>,
    answered: (value: T) => void,
    failed: (error: unknown) => void,
    expired: () => void,
  ): void {
    const call: Expiring = { deadline: 0, settled: false, expire: expired };
    let pending: Promise<T>;
    try {
      pending = start();
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => {
        if (this.settle(call)) answered(value);
      },
      (error: unknown) => {
        if (this.settle(call)) failed(error);
      },
    );
    this.track(call);
  }

  /** Entries held, settled ones not yet dropped included. For tests. */
  get queued(): number {
    return this.#queue.length - this.#head;
  }

  /**
   * Starts the clock on a call: `call.expire()` runs once `timeoutMs` has passed, unless `settle`
   * was called first.
   */
  track(call: Expiring): void {
    call.deadline = performance.now() + this.timeoutMs;
    // Calls mostly settle in the order they started: drop the settled ones at the head now, so the
    // queue (and the closures its entries hold) stays about the size of what is in flight, not of
    // every call made in the last timeoutMs. A sweep in progress owns the queue: it trims itself.
    if (!this.#sweeping) this.#trim();
    this.#queue.push(call);
    this.#unsettled++;
    const timer = this.#timer;
    if (timer === undefined) {
      // A call started from inside a sweep (by an expire() callback) is armed for by the sweep.
      if (!this.#sweeping) this.#arm(this.timeoutMs);
    } else if (!timer.hasRef()) {
      timer.ref();
    }
  }

  #trim(): void {
    const queue = this.#queue;
    let head = this.#head;
    while (head < queue.length && (queue[head] as Expiring).settled) head++;
    if (head === queue.length) {
      if (queue.length > 0) this.#queue = [];
      head = 0;
    } else if (head > 1024 && head * 2 > queue.length) {
      this.#queue = queue.slice(head);
      head = 0;
    }
    this.#head = head;
  }

  /** Marks a tracked call answered. False when it was already settled (expired): drop the late answer. */
  settle(call: Expiring): boolean {
    if (call.settled) return false;
    call.settled = true;
    if (--this.#unsettled === 0) this.#timer?.unref();
    return true;
  }

  #arm(delayMs: number): void {
    this.timersArmed++;
    // Node's timers run on whole milliseconds and may fire a fraction early: the sweep re-arms then.
    this.#timer = setTimeout(this.#due, delayMs < 1 ? 1 : Math.ceil(delayMs));
    if (this.#unsettled === 0) this.#timer.unref();
  }

  // The timer only schedules the sweep: after a blocked event loop, timers run before the poll phase
  // reads the replies already waiting on the socket, and those calls were answered in time.
  readonly #due = (): void => {
    setImmediate(this.#sweep);
  };

  readonly #sweep = (): void => {
    this.#timer = undefined;
    this.#sweeping = true;
    const now = performance.now();
    const queue = this.#queue;
    let head = this.#head;
    while (head < queue.length) {
      const call = queue[head] as Expiring;
      if (!call.settled) {
        if (call.deadline > now) break;
        this.settle(call);
        try {
          call.expire();
        } catch {
          // expire() settles a promise and calls guarded hooks: it does not throw, and one that did must not stop the sweep.
        }
      }
      head++;
    }
    this.#sweeping = false;
    if (head === queue.length) {
      this.#queue = [];
      this.#head = 0;
      return;
    }
    // Drop the swept prefix now and then, so the array does not grow with the call rate.
    if (head > 1024 && head * 2 > queue.length) {
      this.#queue = queue.slice(head);
      head = 0;
    }
    this.#head = head;
    this.#arm((this.#queue[head] as Expiring).deadline - now);
  };
}
