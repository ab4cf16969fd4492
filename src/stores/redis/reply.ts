// The reply of a batch script (lua/single.lua), checked whole, then turned into one result per key.
import type { StoreResult } from '../../types.js';

/** The integers a record of the reply takes (see lua/single.lua), from its first; 0 for anything else. */
function recordLength(head: unknown): number {
  if (typeof head !== 'number' || !Number.isSafeInteger(head)) return 0;
  if (head >= 0) return 1;
  return (-1 - head) % 2 === 0 ? 2 : 3;
}

/**
 * Answers each item with its record of a batch's reply (lua/single.lua): one integer for an allowed
 * key whose reset is the batch's shared one, two for another allowed key, three for a denied one.
 * Checks the whole reply first: false, resolving nothing, when it does not hold one record per item.
 */
export function settle(items: ReadonlyArray<{ answer(result: StoreResult): void }>, reply: unknown): boolean {
  if (!Array.isArray(reply)) return false;
  const values = reply as unknown[];
  let at = 1;
  for (let i = 0; i < items.length; i++) {
    const length = recordLength(values[at]);
    if (length === 0) return false;
    for (let k = 1; k < length; k++) if (typeof values[at + k] !== 'number') return false;
    at += length;
  }
  const shared = values[0];
  if (at !== values.length || typeof shared !== 'number') return false;
  at = 1;
  for (let i = 0; i < items.length; i++) {
    const head = values[at] as number;
    const item = items[i] as (typeof items)[number];
    if (head >= 0) {
      item.answer({ allowed: true, remaining: head, resetMs: shared, retryAfterMs: 0 });
      at += 1;
      continue;
    }
    const twice = -1 - head;
    if (twice % 2 === 0) {
      item.answer({
        allowed: true,
        remaining: values[at + 1] as number,
        resetMs: twice / 2,
        retryAfterMs: 0,
      });
      at += 2;
    } else {
      item.answer({
        allowed: false,
        remaining: values[at + 1] as number,
        resetMs: (twice - 1) / 2,
        retryAfterMs: values[at + 2] as number,
      });
      at += 3;
    }
  }
  return true;
}
