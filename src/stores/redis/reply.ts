// The reply of a batch script (lua/single.lua), checked whole, then turned into one result per key.

import { withFields } from '../../copy.js';
import type { StoreReply, StoreRequest, StoreResult } from '../../types.js';

/** The integers a record's decision takes (see lua/single.lua), from its first; 0 for anything else. */
function recordLength(head: unknown): number {
  if (typeof head !== 'number' || !Number.isSafeInteger(head)) return 0;
  if (head >= 0) return 1;
  return (-1 - head) % 2 === 0 ? 2 : 3;
}

/** Whether the reply holds `count` records, each followed by `fields` integers, and nothing else. */
function wellFormed(values: readonly unknown[], count: number, fields: number): boolean {
  let at = 1;
  for (let i = 0; i < count; i++) {
    const length = recordLength(values[at]);
    if (length === 0) return false;
    for (let k = 1; k < length + fields; k++) if (typeof values[at + k] !== 'number') return false;
    at += length + fields;
  }
  return at === values.length && typeof values[0] === 'number';
}

/**
 * Answers each request of a batch with its record of the script's reply (lua/single.lua), through
 * its reply, in order: one integer for an allowed key whose reset is the batch's shared one, two
 * for another allowed key, three for a denied one; then, for an operation whose entry has `fields`,
 * that many integers (the result's `fields`); then, for a batch that reads what operators stored,
 * one (the result's `stored` when not 0). Checks the whole reply first: false, answering nothing,
 * when it does not hold one record per request.
 */
export function answerRecords(
  reply: unknown,
  requests: readonly StoreRequest[],
  replies: readonly StoreReply[],
  fields: number,
  stored = false,
): boolean {
  if (!Array.isArray(reply)) return false;
  const values = reply as unknown[];
  const count = requests.length;
  if (!wellFormed(values, count, stored ? fields + 1 : fields)) return false;
  const shared = values[0] as number;
  let at = 1;
  for (let i = 0; i < count; i++) {
    const head = values[at] as number;
    let result: StoreResult;
    if (head >= 0) {
      result = { allowed: true, remaining: head, resetMs: shared, retryAfterMs: 0 };
      at += 1;
    } else if ((-1 - head) % 2 === 0) {
      result = {
        allowed: true,
        remaining: values[at + 1] as number,
        resetMs: (-1 - head) / 2,
        retryAfterMs: 0,
      };
      at += 2;
    } else {
      result = {
        allowed: false,
        remaining: values[at + 1] as number,
        resetMs: (-2 - head) / 2,
        retryAfterMs: values[at + 2] as number,
      };
      at += 3;
    }
    if (fields > 0) {
      result = withFields(result, { fields: values.slice(at, at + fields) as number[] });
      at += fields;
    }
    if (stored) {
      const applied = values[at] as number;
      if (applied !== 0) result = withFields(result, { stored: applied });
      at += 1;
    }
    (replies[i] as StoreReply).answered(requests[i] as StoreRequest, result);
  }
  return true;
}
