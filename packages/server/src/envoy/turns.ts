// Large requests in short turns: the work of one call is cut into slices, and other callers are answered between them.

/**
 * The most descriptor entries resolved in one turn of the event loop. A request at the bounds (64
 * descriptors of 32 entries) is resolved in 8 slices, with the decision and the answer in turns of
 * their own; a request of a few descriptors, Envoy's usual, is one turn as before.
 */
export const ENTRIES_PER_TURN = 256;

/** Resolves on a later turn of the event loop, after the I/O that is waiting (setImmediate). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Maps `items` in order, yielding a turn whenever `ENTRIES_PER_TURN` entries (their `weight`) have
 * been done; returns whether it yielded, so the caller yields between its later steps too.
 */
export function mapInTurns<T, R>(
  items: readonly T[],
  weight: (item: T) => number,
  map: (item: T, index: number) => R,
): InTurns<R> | Promise<InTurns<R>> {
  let total = 0;
  for (const item of items) total += weight(item);
  // The usual request fits one turn: mapped at once, without a promise.
  if (total <= ENTRIES_PER_TURN) return { results: items.map(map), large: false };
  return mapAcrossTurns(items, weight, map);
}

/** What mapInTurns returns: the results in order, and whether it yielded a turn. */
export interface InTurns<R> {
  readonly results: R[];
  readonly large: boolean;
}

async function mapAcrossTurns<T, R>(
  items: readonly T[],
  weight: (item: T) => number,
  map: (item: T, index: number) => R,
): Promise<InTurns<R>> {
  const results: R[] = [];
  let done = 0;
  let large = false;
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as T;
    const cost = weight(item);
    if (done > 0 && done + cost > ENTRIES_PER_TURN) {
      await nextTurn();
      large = true;
      done = 0;
    }
    done += cost;
    results.push(map(item, i));
  }
  return { results, large };
}
