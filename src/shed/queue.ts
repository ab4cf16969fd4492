// The short wait of requests the limit refused: the most important class first, oldest first within a class, each for at most timeoutMs.
import type { ResolvedPriority } from './priorities.js';

/** A request waiting for a ticket. */
export interface ShedWaiter {
  readonly priority: ResolvedPriority;
  /** Hands the waiter its answer (a ticket, or a refusal). */
  readonly settle: (admitted: boolean) => void;
  /** When its wait ends, on the shedder's clock (ms). */
  readonly deadlineMs: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Waiters by class. Priority order rather than one FIFO: under overload the important requests
 * are the ones worth the wait; within a class the oldest goes first, and none waits longer than
 * `timeoutMs`, so a wait adds at most that much to a request's latency (a deadline per request,
 * the bound CoDel keeps on a queue's delay).
 */
export class WaitQueue {
  readonly max: number;
  readonly timeoutMs: number;
  readonly #byClass: ShedWaiter[][];
  #size = 0;

  constructor(classes: number, max: number, timeoutMs: number) {
    this.max = max;
    this.timeoutMs = timeoutMs;
    this.#byClass = Array.from({ length: classes }, () => []);
  }

  /** Waiters now. */
  get size(): number {
    return this.#size;
  }

  /** Waiters of one class now. */
  sizeOf(index: number): number {
    return this.#byClass[index]?.length ?? 0;
  }

  /**
   * Queues `waiter` when there is room, or when a less important class has a waiter to give up
   * its place (its newest one, refused). `false`: the queue is full of requests at least as
   * important, and the newcomer is refused.
   */
  add(waiter: ShedWaiter): boolean {
    if (this.#size >= this.max) {
      const victim = this.#newestBelow(waiter.priority.index);
      if (victim === undefined) return false;
      this.#remove(victim);
      victim.settle(false);
    }
    (this.#byClass[waiter.priority.index] as ShedWaiter[]).push(waiter);
    this.#size += 1;
    // Not unref'd: an awaited acquire must settle, and it holds the process for timeoutMs at most.
    waiter.timer = setTimeout(() => {
      waiter.timer = undefined;
      this.#remove(waiter);
      waiter.settle(false);
    }, this.timeoutMs);
    return true;
  }

  /**
   * The most important class's oldest waiter, taken out of the queue, when `fits` its class; else
   * undefined. A waiter whose deadline has passed at `nowMs` is refused on the way: on a busy event
   * loop its timer fires late, and the ticket must not go to a request that has waited too long.
   */
  take(fits: (priority: ResolvedPriority) => boolean, nowMs: number): ShedWaiter | undefined {
    for (const waiters of this.#byClass) {
      let head = waiters[0];
      while (head !== undefined && head.deadlineMs <= nowMs) {
        this.#remove(head);
        head.settle(false);
        head = waiters[0];
      }
      if (head === undefined) continue;
      // A more important class has a higher ceiling: if its head does not fit, nobody below does.
      if (!fits(head.priority)) return undefined;
      waiters.shift();
      this.#size -= 1;
      if (head.timer !== undefined) clearTimeout(head.timer);
      head.timer = undefined;
      return head;
    }
    return undefined;
  }

  /** Refuses every waiter (the shedder is closed). */
  clear(): void {
    for (const waiters of this.#byClass) {
      for (const waiter of waiters.splice(0)) {
        if (waiter.timer !== undefined) clearTimeout(waiter.timer);
        waiter.settle(false);
      }
    }
    this.#size = 0;
  }

  #newestBelow(index: number): ShedWaiter | undefined {
    for (let below = this.#byClass.length - 1; below > index; below -= 1) {
      const waiters = this.#byClass[below] as ShedWaiter[];
      const newest = waiters[waiters.length - 1];
      if (newest !== undefined) return newest;
    }
    return undefined;
  }

  #remove(waiter: ShedWaiter): void {
    const waiters = this.#byClass[waiter.priority.index] as ShedWaiter[];
    const at = waiters.indexOf(waiter);
    if (at === -1) return;
    waiters.splice(at, 1);
    this.#size -= 1;
    if (waiter.timer !== undefined) clearTimeout(waiter.timer);
    waiter.timer = undefined;
  }
}
