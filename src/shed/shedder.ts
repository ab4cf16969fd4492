// The shedder: tickets up to a limit the algorithm moves with latency, lower classes refused first, an optional short wait.
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { LimitAlgorithm } from './limits/index.js';
import { type ResolvedShedderOptions, resolveShedderOptions, type ShedderOptions } from './options.js';
import { type ResolvedPriority, unknownPriority } from './priorities.js';
import { type ShedWaiter, WaitQueue } from './queue.js';
import type {
  AcquireOptions,
  Admission,
  PriorityStats,
  Refusal,
  ReleaseOptions,
  ShedderStats,
  Ticket,
} from './types.js';
import { SampleWindow } from './window.js';

/** A load shedder: see {@link createShedder}. `Waits` is whether it has a queue (then `acquire` may wait). */
export interface Shedder<Waits extends boolean = boolean> {
  readonly name: string;
  /** The algorithm's name: 'gradient2', 'vegas' or 'aimd'. */
  readonly algorithm: string;
  /** The concurrency limit now. */
  readonly limit: number;
  /** Tickets out now, every class together. */
  readonly inFlight: number;
  /**
   * A ticket when the request's class has room under the limit, else a refusal; with a `queue`, a
   * promise when the request waits for room. Never throws for overload (`await` works on both).
   */
  acquire(options?: AcquireOptions): Waits extends false ? Admission : Admission | Promise<Admission>;
  /**
   * Runs `fn` under a ticket, released when it settles (an error named `TimeoutError` counts as
   * dropped). A refused call is not made: it rejects with ERR_SLUICE_SHED, whose `cause` is the refusal.
   */
  run<T>(fn: () => T | PromiseLike<T>, options?: AcquireOptions): Promise<T>;
  /** The limit, tickets, latency and each class's counts, now. */
  stats(): ShedderStats;
  /** Refuses every waiting request. Tickets out may still be released. */
  close(): void;
}

/** What a ticket tells its shedder when released. */
interface TicketOwner {
  end(priority: ResolvedPriority, startMs: number, dropped: boolean): void;
}

/** One granted request. A class, not a closure: a grant allocates this one small object. */
class GrantedTicket implements Ticket {
  readonly allowed = true;
  readonly priority: string;
  readonly #owner: TicketOwner;
  readonly #class: ResolvedPriority;
  readonly #startMs: number;
  #released = false;

  constructor(owner: TicketOwner, priority: ResolvedPriority, startMs: number) {
    this.#owner = owner;
    this.#class = priority;
    this.priority = priority.name;
    this.#startMs = startMs;
  }

  release(options?: ReleaseOptions): void {
    if (this.#released) return;
    this.#released = true;
    this.#owner.end(this.#class, this.#startMs, options?.dropped === true);
  }
}

const DROPPED: ReleaseOptions = Object.freeze({ dropped: true });

class LoadShedder implements Shedder, TicketOwner {
  readonly name: string;
  readonly #config: ResolvedShedderOptions;
  readonly #algorithm: LimitAlgorithm;
  readonly #byName: Map<string, ResolvedPriority>;
  /** Per class: in flight at `limit · share` or more, it is refused. Recomputed when the limit moves. */
  readonly #ceilings: Float64Array;
  readonly #inFlightBy: Int32Array;
  readonly #admittedBy: Float64Array;
  readonly #refusedBy: Float64Array;
  readonly #droppedBy: Float64Array;
  /** One frozen refusal per class: refusing allocates nothing. */
  readonly #refusals: readonly Refusal[];
  readonly #window: SampleWindow;
  readonly #queue: WaitQueue | undefined;
  #inFlight = 0;
  #latencyMs = 0;

  constructor(config: ResolvedShedderOptions) {
    this.name = config.name;
    this.#config = config;
    this.#algorithm = config.limit.algorithm;
    const classes = config.priorities.length;
    this.#byName = new Map(config.priorities.map((priority) => [priority.name, priority]));
    this.#ceilings = new Float64Array(classes);
    this.#inFlightBy = new Int32Array(classes);
    this.#admittedBy = new Float64Array(classes);
    this.#refusedBy = new Float64Array(classes);
    this.#droppedBy = new Float64Array(classes);
    this.#refusals = config.priorities.map((priority) =>
      Object.freeze({ allowed: false as const, priority: priority.name, retryAfterMs: config.retryAfterMs }),
    );
    this.#window = new SampleWindow(config.now(), 0);
    this.#queue =
      config.queue === undefined
        ? undefined
        : new WaitQueue(classes, config.queue.max, config.queue.timeoutMs);
    this.#setCeilings();
    config.metrics?.track(this);
  }

  get algorithm(): string {
    return this.#algorithm.name;
  }

  get limit(): number {
    return this.#algorithm.limit;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  acquire(options?: AcquireOptions): Admission | Promise<Admission> {
    const priority = this.#classOf(options?.priority);
    const index = priority.index;
    if (this.#inFlight < (this.#ceilings[index] as number)) return this.#grant(priority);
    const queue = this.#queue;
    if (queue === undefined) return this.#refuse(priority);
    return this.#wait(priority, queue);
  }

  // Its own method: a closure in `acquire` would make every call allocate the scope it captures,
  // granted and refused calls included (56 bytes each).
  #wait(priority: ResolvedPriority, queue: WaitQueue): Promise<Admission> {
    return new Promise<Admission>((resolve) => {
      const waiter: ShedWaiter = {
        priority,
        deadlineMs: this.#config.now() + queue.timeoutMs,
        timer: undefined,
        settle: (admitted) => resolve(admitted ? this.#grant(priority) : this.#refuse(priority)),
      };
      if (!queue.add(waiter)) resolve(this.#refuse(priority));
    });
  }

  async run<T>(fn: () => T | PromiseLike<T>, options?: AcquireOptions): Promise<T> {
    const admission = await this.acquire(options);
    if (!admission.allowed) {
      throw new SluiceError(
        ERROR_CODES.SHED,
        `The shedder "${this.name}" refused a call of priority "${admission.priority}": ${this.#inFlight} in flight of a limit of ${this.limit}. Retry in ${admission.retryAfterMs} ms`,
        { cause: admission },
      );
    }
    try {
      const result = await fn();
      admission.release();
      return result;
    } catch (error) {
      admission.release(error instanceof Error && error.name === 'TimeoutError' ? DROPPED : undefined);
      throw error;
    }
  }

  stats(): ShedderStats {
    const priorities: Record<string, PriorityStats> = {};
    for (const { name, index } of this.#config.priorities) {
      priorities[name] = {
        inFlight: this.#inFlightBy[index] as number,
        queued: this.#queue?.sizeOf(index) ?? 0,
        admitted: this.#admittedBy[index] as number,
        refused: this.#refusedBy[index] as number,
        dropped: this.#droppedBy[index] as number,
      };
    }
    return {
      name: this.name,
      algorithm: this.algorithm,
      limit: this.limit,
      inFlight: this.#inFlight,
      queued: this.#queue?.size ?? 0,
      latencyMs: this.#latencyMs,
      priorities,
    };
  }

  close(): void {
    this.#queue?.clear();
  }

  end(priority: ResolvedPriority, startMs: number, dropped: boolean): void {
    const index = priority.index;
    this.#inFlight -= 1;
    (this.#inFlightBy[index] as number) -= 1;
    if (dropped) (this.#droppedBy[index] as number) += 1;
    const { now, limit } = this.#config;
    const nowMs = now();
    const window = this.#window;
    if (window.add(nowMs - startMs, dropped, nowMs, limit.windowMs, limit.windowSamples)) {
      window.seal();
      this.#latencyMs = window.rttMs;
      this.#algorithm.update(window);
      window.reset(nowMs, this.#inFlight);
      this.#setCeilings();
    }
    if (this.#queue !== undefined && this.#queue.size > 0) this.#drain(this.#queue);
  }

  #classOf(name: string | undefined): ResolvedPriority {
    if (name === undefined) return this.#config.defaultPriority;
    const found = this.#byName.get(name);
    if (found === undefined) throw unknownPriority('priority', name, this.#config.priorities);
    return found;
  }

  #grant(priority: ResolvedPriority): Ticket {
    const index = priority.index;
    this.#inFlight += 1;
    (this.#inFlightBy[index] as number) += 1;
    (this.#admittedBy[index] as number) += 1;
    this.#window.sawInFlight(this.#inFlight);
    return new GrantedTicket(this, priority, this.#config.now());
  }

  #refuse(priority: ResolvedPriority): Refusal {
    (this.#refusedBy[priority.index] as number) += 1;
    this.#window.refused += 1;
    return this.#refusals[priority.index] as Refusal;
  }

  /** Admits waiters while the most important one fits under its class's ceiling. */
  #drain(queue: WaitQueue): void {
    const fits = (priority: ResolvedPriority) => this.#inFlight < (this.#ceilings[priority.index] as number);
    const nowMs = this.#config.now();
    for (let waiter = queue.take(fits, nowMs); waiter !== undefined; waiter = queue.take(fits, nowMs)) {
      waiter.settle(true);
    }
  }

  #setCeilings(): void {
    const limit = this.#algorithm.limit;
    for (const { index, share } of this.#config.priorities) this.#ceilings[index] = limit * share;
  }
}

/**
 * A load shedder for one service: it hands out tickets up to a concurrency limit that follows the
 * latency of the work done under them, and refuses the least important requests first when the
 * limit is reached. Nothing is stored outside the process: each process sheds for itself.
 *
 * @example
 * import { createShedder } from 'sluice/shed';
 * const shedder = createShedder({ limit: 'gradient2' });
 * const ticket = await shedder.acquire({ priority: 'sheddable' });
 * if (!ticket.allowed) return reply503(ticket.retryAfterMs);
 * try { await work(); ticket.release(); } catch (error) { ticket.release({ dropped: isTimeout(error) }); throw error; }
 */
export function createShedder<const Options extends ShedderOptions>(
  options?: Options,
): Shedder<Options extends { readonly queue: object } ? true : false> {
  // The class answers a promise only when it has a queue, which is what the type says.
  return new LoadShedder(resolveShedderOptions(options)) as never;
}
