// The space-saving sketch: the most frequent items of a stream in a fixed number of counters.

/** One item of a top-k list, with how far its count may be above the truth. */
export interface HeavyHitter {
  /** The identifier (whose quota: a client address, a user, an API key). */
  readonly identifier: string;
  /** Counted occurrences: at least the true number, at most `error` more. */
  readonly count: number;
  /**
   * How much of `count` may belong to identifiers this counter held before (0 when it has held
   * only this one): the true number is between `count - error` and `count`.
   */
  readonly error: number;
}

/**
 * Keeps `capacity` counters over a stream of any number of distinct items (Metwally, Agrawal and
 * El Abbadi, "Efficient computation of frequent and top-k elements in data streams", 2005). An item
 * already counted gets +1; a new one takes the smallest counter, inheriting its count as `error`.
 * After `total` occurrences: every count is at most `total / capacity` above the truth, and every item
 * seen more than `total / capacity` times holds a counter. Memory does not grow with the stream.
 *
 * @example
 * const sketch = new SpaceSaving(20);
 * for (const address of deniedAddresses) sketch.add(address);
 * sketch.top(5); // [{ identifier: '203.0.113.9', count: 1200, error: 0 }, ...]
 */
export class SpaceSaving {
  readonly capacity: number;
  // Parallel arrays over the slots; the map finds an item's slot. A linear scan for the smallest
  // counter costs `capacity` comparisons, and only when an item not yet counted arrives.
  readonly #slotOf = new Map<string, number>();
  readonly #items: string[] = [];
  readonly #counts: Float64Array;
  readonly #errors: Float64Array;
  #total = 0;

  constructor(capacity: number) {
    this.capacity = capacity;
    this.#counts = new Float64Array(capacity);
    this.#errors = new Float64Array(capacity);
  }

  /** Occurrences added since creation (or the last `clear`). */
  get total(): number {
    return this.#total;
  }

  /** Counters in use: at most `capacity`, whatever the number of distinct items. */
  get size(): number {
    return this.#items.length;
  }

  /** Whether `item` holds a counter. */
  holds(item: string): boolean {
    return this.#slotOf.has(item);
  }

  /** The smallest count held (0 while a counter is free): what an item not held may have had at most. */
  get smallest(): number {
    if (this.#items.length < this.capacity) return 0;
    let smallest = Number.POSITIVE_INFINITY;
    for (const count of this.#counts) if (count < smallest) smallest = count;
    return smallest;
  }

  /** Counts `weight` occurrences of `item`. */
  add(item: string, weight = 1): void {
    this.#total += weight;
    const slot = this.#slotOf.get(item);
    if (slot !== undefined) {
      this.#counts[slot] = (this.#counts[slot] as number) + weight;
      return;
    }
    const items = this.#items;
    if (items.length < this.capacity) {
      this.#slotOf.set(item, items.length);
      this.#counts[items.length] = weight;
      items.push(item);
      return;
    }
    const counts = this.#counts;
    let smallest = 0;
    for (let i = 1; i < counts.length; i++) {
      if ((counts[i] as number) < (counts[smallest] as number)) smallest = i;
    }
    this.#slotOf.delete(items[smallest] as string);
    this.#slotOf.set(item, smallest);
    items[smallest] = item;
    const inherited = counts[smallest] as number;
    this.#errors[smallest] = inherited;
    counts[smallest] = inherited + weight;
  }

  /** The `limit` items with the highest counts, highest first (ties: the lower error first). */
  top(limit = this.capacity): HeavyHitter[] {
    const entries: HeavyHitter[] = this.#items.map((identifier, slot) => ({
      identifier,
      count: this.#counts[slot] as number,
      error: this.#errors[slot] as number,
    }));
    entries.sort((a, b) => b.count - a.count || a.error - b.error);
    return entries.slice(0, limit);
  }

  /** Forgets everything. */
  clear(): void {
    this.#slotOf.clear();
    this.#items.length = 0;
    this.#counts.fill(0);
    this.#errors.fill(0);
    this.#total = 0;
  }
}

/**
 * The heavy hitters of recent time: two space-saving sketches, the current window's and the one
 * before, turned over every window by `rotate()`. `top()` merges them, so it covers the last one to
 * two windows: an identifier denied yesterday does not outrank the one denied now.
 */
export class RecentHeavyHitters {
  #current: SpaceSaving;
  #previous: SpaceSaving;

  constructor(capacity: number) {
    this.#current = new SpaceSaving(capacity);
    this.#previous = new SpaceSaving(capacity);
  }

  get capacity(): number {
    return this.#current.capacity;
  }

  /** Counts `weight` occurrences of `item` in the current window. */
  add(item: string, weight = 1): void {
    this.#current.add(item, weight);
  }

  /** Starts a new window: the current one becomes the previous, and the previous is forgotten. */
  rotate(): void {
    const forgotten = this.#previous;
    forgotten.clear();
    this.#previous = this.#current;
    this.#current = forgotten;
  }

  /**
   * The `limit` items with the highest counts over both windows, highest first. An item one full
   * sketch does not hold may have had up to that sketch's smallest count there: it is added to `error`.
   */
  top(limit = this.capacity): HeavyHitter[] {
    const sketches = [this.#current, this.#previous];
    const merged = new Map<string, { count: number; error: number }>();
    for (const sketch of sketches) {
      for (const hitter of sketch.top()) {
        const entry = merged.get(hitter.identifier);
        if (entry === undefined) merged.set(hitter.identifier, { count: hitter.count, error: hitter.error });
        else {
          entry.count += hitter.count;
          entry.error += hitter.error;
        }
      }
    }
    for (const sketch of sketches) {
      if (sketch.size < sketch.capacity) continue;
      const smallest = sketch.smallest;
      for (const [identifier, entry] of merged) {
        if (!sketch.holds(identifier)) {
          entry.count += smallest;
          entry.error += smallest;
        }
      }
    }
    return [...merged]
      .map(([identifier, { count, error }]) => ({ identifier, count, error }))
      .sort((a, b) => b.count - a.count || a.error - b.error)
      .slice(0, limit);
  }

  /** Forgets everything. */
  clear(): void {
    this.#current.clear();
    this.#previous.clear();
  }
}
