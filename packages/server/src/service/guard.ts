// The service's guard against its own overload: one shedder per process, a short CoDel-style wait, refusals counted by protocol.
import { createShedder, type Refusal, type Shedder, type Ticket } from 'sluice/shed';
import { LoopDelay } from './loop-delay.js';

/** The protocols a refusal is counted under. */
export type GuardProtocol = 'grpc' | 'http';

/** What the guard is set to. */
export interface GuardSettings {
  /** The concurrency limit before any latency is seen, and the bounds the limit moves within. */
  readonly initial: number;
  readonly min: number;
  readonly max: number;
  /** The most requests waiting for a ticket; 0: none waits, a request without room is refused at once. */
  readonly queue: number;
  /**
   * How long the wait may stay non-empty before it counts as overload rather than a burst, and the
   * longest a request waits while it is a burst.
   */
  readonly burstMs: number;
  /** The longest a request waits once the wait counts as overload. */
  readonly waitMs: number;
  /** What a refusal asks the client to wait before trying again. */
  readonly retryAfterMs: number;
  /** The most calls one HTTP/2 connection holds open at once (gRPC's SETTINGS_MAX_CONCURRENT_STREAMS). */
  readonly streams: number;
}

/**
 * The defaults, chosen on the figures of docs/service.md's overload section: a limit that starts
 * well above what a burst of Envoy calls holds at once on one core (a few hundred), a wait that lets
 * a burst of thousands through within a caller's usual deadline, and one that, under sustained
 * overload, adds at most 50 ms to an answered call.
 */
export const GUARD_DEFAULTS: GuardSettings = {
  initial: 500,
  min: 100,
  max: 5000,
  queue: 10_000,
  burstMs: 2000,
  waitMs: 50,
  retryAfterMs: 1000,
  streams: 100,
};

/** How often the wait is looked at when no ticket comes back: waiters past their time are refused, room is filled. */
const EXPIRY_TICK_MS = 10;

/** A request waiting for a ticket. */
interface Waiter {
  readonly protocol: GuardProtocol;
  readonly sinceMs: number;
  /** The caller's own deadline (gRPC's grpc-timeout), in ms from `sinceMs`; it never waits past it. */
  readonly deadlineMs: number | undefined;
  readonly settle: (admission: Ticket | Refusal) => void;
}

/** The guard's counts at one moment, for the dashboard and /metrics. */
export interface GuardStats {
  readonly limit: number;
  readonly inFlight: number;
  readonly queued: number;
  /** Whether the wait counts as overload now (its short wait applies, newest first). */
  readonly overloaded: boolean;
  /**
   * How far behind the event loop is by its own work, in ms: the part of its delay during which
   * this process ran (its CPU time), not the part the machine spent running something else.
   */
  readonly lagMs: number;
  /** Requests refused since the service started, by protocol. */
  readonly refused: Readonly<Record<GuardProtocol, number>>;
  readonly admitted: number;
}

/**
 * Admits the service's work under an adaptive concurrency limit (`sluice/shed`, gradient2 on the
 * latency from a ticket's grant to its answer), and refuses the rest before any of it is read.
 *
 * A request that finds no room waits, as CoDel bounds a queue's delay rather than its length:
 * while the wait has emptied within the last `burstMs`, it is a burst that the service will work
 * through, and a request may wait up to `burstMs`, oldest first; once it has not emptied for that
 * long, it is overload: a request waits at most `waitMs`, and the newest is admitted first (a call
 * that has already waited long is the one most likely to be late anyway, and serving the newest
 * keeps the answered calls' latency short). A caller that sent its own deadline waits up to it.
 *
 * The calls in flight do not see what waits unread while the event loop works through a batch
 * (on the memory store a call is answered in the turn that reads it), so the loop's delay is
 * watched too. A call read now has waited about half the loop's last turn plus what has passed of
 * this one; it is refused at once when that is past its deadline, or, without one, past `waitMs`
 * once the loop has been behind by more than `waitMs` for `burstMs`. So under sustained overload
 * each turn answers what it reads in its first `waitMs` and refuses the rest, however many calls
 * the clients keep open: the answered calls wait about a turn, not the whole backlog. The delay is
 * the one the process's own work made: of a late timer, only the CPU time the process used in
 * the meantime counts, so a machine busy with other processes (or a process stopped and
 * continued) is not read as an overload that refusing calls would cure.
 */
export class ServiceGuard {
  readonly settings: GuardSettings;
  readonly #shedder: Shedder<false>;
  readonly #now: () => number;
  /** Waiters, oldest first; `#head` is the index of the oldest still there. */
  #waiting: Waiter[] = [];
  #head = 0;
  #lastEmptyMs: number;
  /** When refusals last emptied the wait (see #emptied); undefined once the service emptied it. */
  #refusedEmptyMs: number | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** The event loop's delay by the process's own work; none with `watchLoop: false`. */
  readonly #loop: LoopDelay | undefined;
  #refusedGrpc = 0;
  #refusedHttp = 0;
  #admitted = 0;
  /** Every refusal is this one frozen object: refusing allocates nothing. */
  readonly #refusal: Refusal;

  /**
   * `now` is the clock waits and latency are read from, `cpuNow` the process's CPU time in ms (a
   * test gives both, to say whether a jump of the clock was the process's own work); `watchLoop:
   * false` leaves the event loop's delay out.
   */
  constructor(
    settings: GuardSettings,
    {
      now = () => performance.now(),
      cpuNow,
      watchLoop = true,
    }: { now?: () => number; cpuNow?: () => number; watchLoop?: boolean } = {},
  ) {
    this.settings = settings;
    this.#now = now;
    this.#shedder = createShedder({
      name: 'service',
      limit: { algorithm: 'gradient2', initial: settings.initial, min: settings.min, max: settings.max },
      priorities: ['default'],
      retryAfterMs: settings.retryAfterMs,
      now,
    });
    this.#lastEmptyMs = now();
    this.#loop = watchLoop ? new LoopDelay(settings, now, cpuNow) : undefined;
    this.#refusal = Object.freeze({
      allowed: false,
      priority: 'default',
      retryAfterMs: settings.retryAfterMs,
    });
  }

  /**
   * A ticket, a refusal, or (when the request has to wait) a promise of one. Never throws.
   * `deadlineMs`: how long the caller said it waits for the answer (gRPC's grpc-timeout): a call is
   * refused once it has waited unread, by the loop's own delay, longer than that (it could not be answered in time), and
   * otherwise may wait up to it, however busy; a call without one follows the burst and overload rules.
   */
  acquire(protocol: GuardProtocol, deadlineMs?: number): Ticket | Refusal | Promise<Ticket | Refusal> {
    const shedder = this.#shedder;
    const nowMs = this.#now();
    const waitMs = this.settings.waitMs;
    const loop = this.#loop;
    const waitedMs = loop === undefined ? 0 : loop.arrive(nowMs, Math.min(waitMs, deadlineMs ?? waitMs));
    const late =
      deadlineMs === undefined
        ? loop !== undefined && waitedMs > waitMs && loop.lagging(nowMs)
        : waitedMs >= deadlineMs;
    if (late) return this.#refuse(protocol);
    const room = shedder.inFlight < shedder.limit;
    const waiting = this.#size();
    if (waiting === 0 && room) return this.#grant();
    if (waiting >= this.settings.queue) return this.#refuse(protocol);
    // The wait was empty until now: a burst starts here, unless refusals emptied it just before
    // (within `waitMs`: the overload goes on).
    if (waiting === 0 && (this.#refusedEmptyMs === undefined || nowMs - this.#refusedEmptyMs >= waitMs)) {
      this.#lastEmptyMs = nowMs;
    }
    const admission = new Promise<Ticket | Refusal>((settle) => {
      this.#waiting.push({ protocol, sinceMs: nowMs, deadlineMs, settle });
    });
    this.#timer ??= setInterval(() => {
      this.#expire();
      this.#drain();
    }, EXPIRY_TICK_MS);
    // Room, but others waited first: they go first (or, under overload, this newest one does).
    if (room) this.#drain();
    return admission;
  }

  /**
   * Gives a ticket back and admits waiters into the room it leaves. `dropped`: the work failed for
   * overload (its caller went away before the answer), which shrinks the limit.
   */
  done(ticket: Ticket, dropped = false): void {
    ticket.release(dropped ? DROPPED : undefined);
    if (this.#size() > 0) this.#drain();
  }

  stats(): GuardStats {
    const shedder = this.#shedder;
    return {
      limit: shedder.limit,
      inFlight: shedder.inFlight,
      queued: this.#size(),
      overloaded: this.#overloaded(this.#now()) || (this.#loop?.lagging(this.#now()) ?? false),
      lagMs: this.#loop?.lagMs ?? 0,
      refused: { grpc: this.#refusedGrpc, http: this.#refusedHttp },
      admitted: this.#admitted,
    };
  }

  /** Refuses every waiter and stops the expiry timer (the service is stopping). */
  close(): void {
    for (let waiter = this.#takeOldest(); waiter !== undefined; waiter = this.#takeOldest()) {
      waiter.settle(this.#refuse(waiter.protocol));
    }
    this.#stopTimer();
    this.#loop?.close();
  }

  #size(): number {
    return this.#waiting.length - this.#head;
  }

  #overloaded(nowMs: number): boolean {
    return this.#size() > 0 && nowMs - this.#lastEmptyMs > this.settings.burstMs;
  }

  #grant(): Ticket {
    this.#admitted += 1;
    // One class, and room checked first: the shedder grants.
    return this.#shedder.acquire() as Ticket;
  }

  #refuse(protocol: GuardProtocol): Refusal {
    if (protocol === 'grpc') this.#refusedGrpc += 1;
    else this.#refusedHttp += 1;
    return this.#refusal;
  }

  /** Admits waiters while there is room: the oldest during a burst, the newest under overload. */
  #drain(): void {
    const shedder = this.#shedder;
    this.#expireOldest(this.#now());
    let admitted = false;
    while (this.#size() > 0 && shedder.inFlight < shedder.limit) {
      const waiter = this.#overloaded(this.#now()) ? this.#takeNewest() : this.#takeOldest();
      if (waiter === undefined) break;
      waiter.settle(this.#grant());
      admitted = true;
    }
    if (this.#size() === 0) this.#emptied(!admitted);
  }

  /**
   * Refuses the waiters that have waited as long as they may: a caller with a deadline of its own,
   * up to it (later, its answer would come too late to be read); the others `burstMs` during a
   * burst, `waitMs` under overload. The wait is compacted as it goes, oldest first still.
   */
  #expire(): void {
    const nowMs = this.#now();
    const longestMs = this.#overloaded(nowMs) ? this.settings.waitMs : this.settings.burstMs;
    const kept: Waiter[] = [];
    for (let at = this.#head; at < this.#waiting.length; at++) {
      const waiter = this.#waiting[at] as Waiter;
      if (nowMs - waiter.sinceMs < (waiter.deadlineMs ?? longestMs)) kept.push(waiter);
      else waiter.settle(this.#refuse(waiter.protocol));
    }
    this.#waiting = kept;
    this.#head = 0;
    if (kept.length === 0) this.#emptied(true);
  }

  /** Refuses the oldest waiters while they have waited as long as they may (the rest: at the next expiry tick). */
  #expireOldest(nowMs: number): void {
    const longestMs = this.#overloaded(nowMs) ? this.settings.waitMs : this.settings.burstMs;
    while (this.#size() > 0) {
      const oldest = this.#waiting[this.#head] as Waiter;
      if (nowMs - oldest.sinceMs < (oldest.deadlineMs ?? longestMs)) return;
      this.#head += 1;
      oldest.settle(this.#refuse(oldest.protocol));
    }
  }

  /**
   * The wait is empty. `byRefusal`: emptied by refusing what had waited too long, not by admitting
   * it: the service has not caught up, so an overload stays one (otherwise each round of refusals
   * would start a new burst, with its long waits, oldest first).
   */
  #emptied(byRefusal: boolean): void {
    const nowMs = this.#now();
    if (byRefusal) this.#refusedEmptyMs = nowMs;
    else {
      this.#lastEmptyMs = nowMs;
      this.#refusedEmptyMs = undefined;
    }
    this.#waiting = [];
    this.#head = 0;
    this.#stopTimer();
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #takeOldest(): Waiter | undefined {
    if (this.#size() === 0) return undefined;
    const waiter = this.#waiting[this.#head];
    this.#head += 1;
    return waiter;
  }

  #takeNewest(): Waiter | undefined {
    if (this.#size() === 0) return undefined;
    return this.#waiting.pop();
  }
}

const DROPPED = Object.freeze({ dropped: true });
