// The memory store's storage: one slot per identifier in typed-array columns, linked by recency.

/** No slot: the end of a list. */
export const NIL = -1;

const FIRST_CAPACITY = 64;

/** A copy of `array` with room for `capacity` elements, allocated at once (no growth by halves). */
function grownArray<T>(array: readonly T[], capacity: number): T[] {
  const next = new Array<T>(capacity);
  for (let i = 0; i < array.length; i++) next[i] = array[i] as T;
  return next;
}

/**
 * Slots in columns rather than one object per identifier: an object costs its header, a pointer to
 * each field and a box for each number (about 190 bytes per identifier with its Map entry, where
 * these columns take 36), and every write to it passes the garbage collector's write barrier. A
 * number state (GCRA's arrival time, a fixed window's packed count) lives in `numbers`; any other
 * state in `objects`, with NaN in `numbers`. Recency is a doubly linked list through `older` and
 * `newer` (exact LRU: a use relinks a slot); freed slots are chained through `newer`.
 */
export class Slots {
  /** The most slots ever held: the columns grow by doubling up to it. */
  readonly #limit: number;
  capacity = 0;
  /** Slots handed out so far (freed ones are reused first). */
  #used = 0;
  #free = NIL;
  size = 0;
  oldest = NIL;
  newest = NIL;
  identifiers: Array<string | undefined> = [];
  /** Which table (limiter name and tag) holds each slot. */
  tables = new Int32Array(0);
  expiresAt = new Float64Array(0);
  numbers = new Float64Array(0);
  /** Object states, allocated when the first one arrives (the windows' and the log's). */
  objects: unknown[] | undefined;
  older = new Int32Array(0);
  newer = new Int32Array(0);

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** The state kept in a slot. */
  state(slot: number): unknown {
    const value = this.numbers[slot] as number;
    // NaN marks an object state; a number state is never NaN.
    return Number.isNaN(value) ? this.objects?.[slot] : value;
  }

  /** Keeps a state in a slot. */
  keep(slot: number, state: unknown): void {
    if (typeof state === 'number') {
      const objects = this.objects;
      if (objects !== undefined && objects[slot] !== undefined) objects[slot] = undefined;
      this.numbers[slot] = state;
      return;
    }
    this.objects ??= new Array<unknown>(this.capacity);
    this.objects[slot] = state;
    this.numbers[slot] = Number.NaN;
  }

  /** A free slot, linked in as the most recently used. The caller makes room first (see `full`). */
  take(identifier: string, table: number): number {
    let slot = this.#free;
    if (slot === NIL) {
      if (this.#used === this.capacity) this.#grow();
      slot = this.#used++;
    } else {
      this.#free = this.newer[slot] as number;
    }
    this.identifiers[slot] = identifier;
    this.tables[slot] = table;
    this.older[slot] = this.newest;
    this.newer[slot] = NIL;
    if (this.newest === NIL) this.oldest = slot;
    else this.newer[this.newest] = slot;
    this.newest = slot;
    this.size++;
    return slot;
  }

  /** Makes a slot the most recently used. */
  touch(slot: number): void {
    const newest = this.newest;
    if (slot === newest) return;
    const older = this.older;
    const newer = this.newer;
    const before = older[slot] as number;
    const after = newer[slot] as number;
    // Not the newest, so something is newer.
    older[after] = before;
    if (before === NIL) this.oldest = after;
    else newer[before] = after;
    older[slot] = newest;
    newer[slot] = NIL;
    newer[newest] = slot;
    this.newest = slot;
  }

  /** Unlinks a slot and frees it (the caller forgets its identifier in its table first). */
  release(slot: number): void {
    const older = this.older;
    const newer = this.newer;
    const before = older[slot] as number;
    const after = newer[slot] as number;
    if (before === NIL) this.oldest = after;
    else newer[before] = after;
    if (after === NIL) this.newest = before;
    else older[after] = before;
    this.identifiers[slot] = undefined;
    if (this.objects !== undefined) this.objects[slot] = undefined;
    newer[slot] = this.#free;
    this.#free = slot;
    this.size--;
  }

  /** Forgets every slot, and gives the columns back. */
  clear(): void {
    this.capacity = 0;
    this.#used = 0;
    this.#free = NIL;
    this.size = 0;
    this.oldest = NIL;
    this.newest = NIL;
    this.identifiers = [];
    this.tables = new Int32Array(0);
    this.expiresAt = new Float64Array(0);
    this.numbers = new Float64Array(0);
    this.objects = undefined;
    this.older = new Int32Array(0);
    this.newer = new Int32Array(0);
  }

  #grow(): void {
    const capacity = Math.min(this.#limit, Math.max(FIRST_CAPACITY, this.capacity * 2));
    const grown = <T extends Int32Array | Float64Array>(column: T, make: (n: number) => T): T => {
      const next = make(capacity);
      next.set(column);
      return next;
    };
    this.tables = grown(this.tables, (n) => new Int32Array(n));
    this.expiresAt = grown(this.expiresAt, (n) => new Float64Array(n));
    this.numbers = grown(this.numbers, (n) => new Float64Array(n));
    this.older = grown(this.older, (n) => new Int32Array(n));
    this.newer = grown(this.newer, (n) => new Int32Array(n));
    this.identifiers = grownArray(this.identifiers, capacity);
    if (this.objects !== undefined) this.objects = grownArray(this.objects, capacity);
    this.capacity = capacity;
  }
}
