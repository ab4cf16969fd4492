// One timer for every call in flight. A limiter's calls all wait the same `timeoutMs`, so their
// deadlines come in the order the calls were made: only the earliest needs a timer, and a call
// allocates none.
import { performance } from 'node:perf_hooks';

/** A call that may run out of time; the pipeline's calls are their own entries (no allocation per call). */
export interface Expiring {
  deadline: number;
  /** Answered, failed or expired: the deadline no longer applies. */
  settled: boolean;
}

/** An entry of `race`, which expires through its own callback. */
interface Racer extends Expiring {
  readonly expire: () => void;
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
export class Deadlines<E extends Expiring = Racer> {
  readonly timeoutMs: number;
  /** Runs once for each entry whose deadline passed while it was still unsettled. */
  readonly #expired: (entry: E) => void;
  /** Timers armed so far: at most one per sweep, not one per call. For tests. */
  timersArmed = 0;
  #queue: E[] = [];
  #head = 0;
  #unsettled = 0;
  #timer: NodeJS.Timeout | undefined;
  #sweeping = false;
  /** Calls tracked since the last check phase, whose clock #restart starts again. */
  #fresh: E[] = [];
  /** When the sweep first saw a call out of time; it looks again one turn of the loop later. */
  #lookedAt: number | undefined;

  /** `expired` hears of each entry that ran out of time; `race`'s entries bring their own. */
  constructor(
    timeoutMs: number,
    expired: (entry: E) => void = (entry) => (entry as unknown as Racer).expire(),
  ) {
    this.timeoutMs = timeoutMs;
    this.#expired = expired;
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
    this: Deadlines<Racer>,
    start: () => Promise<T>,
    answered: (value: T) => void,
    failed: (error: unknown) => void,
    expired: () => void,
  ): void {
    const call: Racer = { deadline: 0, settled: false, expire: expired };
    let pending: Promise<T>;
    try {
      pending = start();
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => {
        if (this.stop(call)) answered(value);
      },
      (error: unknown) => {
        if (this.stop(call)) failed(error);
      },
    );
    this.track(call);
  }

  /** Entries held, settled ones not yet dropped included. For tests. */
  get queued(): number {
    return this.#queue.length - this.#head;
  }

  /**
   * Starts the clock on an entry: it expires once `timeoutMs` has passed from this turn's check
   * phase, unless `stop` was called first.
   */
  track(call: E): void {
    // The clock starts once this turn of the event loop is over (see #restart): until then the call
    // has no deadline, and reading the clock here (about 40 ns) would buy nothing.
    call.deadline = Number.POSITIVE_INFINITY;
    this.#fresh.push(call);
    if (this.#fresh.length === 1) setImmediate(this.#restart);
    // Calls mostly settle in the order they started: drop the settled ones at the head now, so the
    // queue (and the closures its entries hold) stays about the size of what is in flight, not of
    // every call made in the last timeoutMs. A sweep in progress owns the queue: it trims itself.
    if (!this.#sweeping) {
      const queue = this.#queue;
      let head = this.#head;
      while (head < queue.length && (queue[head] as E).settled) head++;
      if (head === queue.length) {
        if (queue.length > 0) this.#queue = [];
        head = 0;
      } else if (head > 1024 && head * 2 > queue.length) {
        this.#queue = queue.slice(head);
        head = 0;
      }
      this.#head = head;
    }
    this.#queue.push(call);
    this.#unsettled++;
    const timer = this.#timer;
    if (timer === undefined) {
      // A call started from inside a sweep (by an expiry) is armed for by the sweep.
      if (!this.#sweeping) this.#arm(this.timeoutMs);
    } else if (!timer.hasRef()) {
      timer.ref();
    }
  }

  /**
   * The calls tracked in this turn of the event loop get their full `timeoutMs` from its check
   * phase: by then the store's client has written them (some clients write on setImmediate), and
   * the time they spent behind this thread's own work (the rest of a burst being decoded, a long
   * callback) is not counted as the store's.
   */
  readonly #restart = (): void => {
    const deadline = performance.now() + this.timeoutMs;
    const fresh = this.#fresh;
    for (const call of fresh) if (!call.settled) call.deadline = deadline;
    fresh.length = 0;
  };

  /** Stops the clock on an answered entry. False when it had already run out: drop the late answer. */
  stop(call: Expiring): boolean {
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

  /**
   * Whether the unsettled call at the head ran out of time by `now`. A call that did is only a
   * candidate: its reply may have arrived while this thread was busy after the poll phase of this
   * turn had looked at the sockets (a handler that started it, then a long callback). The sweep
   * looks again in the next turn, whose poll phase reads what is waiting, and expires only the
   * calls still unanswered then, whose deadlines passed before the first look.
   */
  #dueBy(now: number): boolean {
    const queue = this.#queue;
    for (let at = this.#head; at < queue.length; at++) {
      const call = queue[at] as E;
      if (!call.settled) return call.deadline <= now;
    }
    return false;
  }

  readonly #sweep = (): void => {
    const now = performance.now();
    // Expire up to the time of the first look, never past it: see #dueBy.
    const cutoff = this.#lookedAt;
    if (cutoff === undefined) {
      if (this.#dueBy(now)) {
        this.#lookedAt = now;
        setImmediate(this.#sweep);
        return;
      }
    } else {
      this.#lookedAt = undefined;
    }
    const until = cutoff ?? now;
    this.#timer = undefined;
    this.#sweeping = true;
    const queue = this.#queue;
    let head = this.#head;
    while (head < queue.length) {
      const call = queue[head] as E;
      if (!call.settled) {
        if (call.deadline > until) break;
        this.stop(call);
        try {
          this.#expired(call);
        } catch {
          // Expiry resolves a promise and calls guarded hooks: it does not throw, and one that did must not stop the sweep.
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
    // A call tracked in this turn gets its deadline at this turn's #restart, after this sweep: a full timeoutMs from now.
    const next = (this.#queue[head] as E).deadline;
    this.#arm(next === Number.POSITIVE_INFINITY ? this.timeoutMs : next - now);
  };
}
