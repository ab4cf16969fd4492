// The calls of one process waiting for a slot on one key: highest priority first, then in the order they came.

/** A call waiting in a lane's queue. */
export interface Waiter {
  /** Higher goes first; equal priorities go in the order they came. */
  readonly priority: number;
  /** The order it came in (set by the queue). */
  seq: number;
  /** Left the queue (aborted, out of time, started): skipped when it comes up. */
  gone: boolean;
}

/**
 * A binary heap of waiters. A waiter that leaves is marked `gone` and dropped when it reaches the
 * top (no search through the heap); `size` counts the waiters still in it.
 */
export class WaiterQueue<W extends Waiter> {
  readonly #heap: W[] = [];
  #seq = 0;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  push(waiter: W): void {
    waiter.seq = this.#seq++;
    this.#insert(waiter);
  }

  /** Puts back a waiter that had left the queue with its old turn (a retry goes before later calls). */
  restore(waiter: W): void {
    this.#insert(waiter);
  }

  /** Marks a waiter as gone, if it is still waiting. */
  remove(waiter: W): boolean {
    if (waiter.gone) return false;
    waiter.gone = true;
    this.#size--;
    return true;
  }

  /** The first waiter, taken out of the queue; undefined when none is left. */
  shift(): W | undefined {
    for (;;) {
      const top = this.#pop();
      if (top === undefined) return undefined;
      if (top.gone) continue;
      top.gone = true;
      this.#size--;
      return top;
    }
  }

  /** Every waiter still in the queue, in no order (for refusing them all). */
  drain(): W[] {
    const waiting = this.#heap.filter((waiter) => !waiter.gone);
    for (const waiter of waiting) waiter.gone = true;
    this.#heap.length = 0;
    this.#size = 0;
    return waiting;
  }

  #pop(): W | undefined {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let first = i;
      if (left < heap.length && before(heap[left] as W, heap[first] as W)) first = left;
      if (right < heap.length && before(heap[right] as W, heap[first] as W)) first = right;
      if (first === i) return top;
      [heap[i], heap[first]] = [heap[first] as W, heap[i] as W];
      i = first;
    }
  }

  #insert(waiter: W): void {
    waiter.gone = false;
    this.#size++;
    const heap = this.#heap;
    heap.push(waiter);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i] as W, heap[parent] as W)) break;
      [heap[i], heap[parent]] = [heap[parent] as W, heap[i] as W];
      i = parent;
    }
  }
}

function before(a: Waiter, b: Waiter): boolean {
  return a.priority !== b.priority ? a.priority > b.priority : a.seq < b.seq;
}
