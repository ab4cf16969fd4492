// The reply of a batch script (lua/single.lua), checked whole, then turned into one result per
// request: read beside the arguments that asked for it (wire.ts).
import { withFields } from '../../copy.js';
import type { StoreReply, StoreRequest, StoreResult } from '../../types.js';

/** GCRA's packed allowed record: -1 - 2 x (reset x PACK + remaining), see lua/single.lua. */
const PACK = 1_048_576;

/** An allowed record too large to pack, as text: 'reset remaining'. */
const OWN_TEXT = /^(\d+) (\d+)$/;

/** Whether the reply holds `count` records, each followed by `fields` integers, and nothing else. */
function wellFormed(values: readonly unknown[], count: number, fields: number): boolean {
  const first = values[0];
  if (typeof first !== 'number') return false;
  const packed = first < 0;
  let at = 1;
  for (let i = 0; i < count; i++) {
    // The values a record's decision takes (see lua/single.lua), from its first: packed, every
    // allowed record is one value.
    const head = values[at];
    let length = 0;
    if (typeof head === 'string') length = packed && OWN_TEXT.test(head) ? 1 : 0;
    else if (typeof head === 'number' && Number.isSafeInteger(head))
      length = head >= 0 ? 1 : (-1 - head) % 2 === 0 ? (packed ? 1 : 2) : 3;
    if (length === 0) return false;
    for (let k = 1; k < length + fields; k++) if (typeof values[at + k] !== 'number') return false;
    at += length + fields;
  }
  return at === values.length;
}

/**
 * Answers each request of a batch with its record of the script's reply (lua/single.lua), through
 * its reply, in order: one value for an allowed key (two in the unpacked form when its reset is not
 * the batch's shared one), three for a denied one; then, for an operation whose entry has `fields`,
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
  const first = values[0] as number;
  const packed = first < 0;
  const shared = packed ? -1 - first : first;
  let at = 1;
  for (let i = 0; i < count; i++) {
    const head = values[at] as number | string;
    let result: StoreResult;
    if (typeof head === 'string') {
      const [, reset, remaining] = OWN_TEXT.exec(head) as RegExpExecArray;
      result = { allowed: true, remaining: Number(remaining), resetMs: Number(reset), retryAfterMs: 0 };
      at += 1;
    } else if (head >= 0) {
      result = { allowed: true, remaining: head, resetMs: shared, retryAfterMs: 0 };
      at += 1;
    } else if ((-1 - head) % 2 === 0) {
      if (packed) {
        const both = (-1 - head) / 2;
        const remaining = both % PACK;
        result = { allowed: true, remaining, resetMs: (both - remaining) / PACK, retryAfterMs: 0 };
        at += 1;
      } else {
        result = {
          allowed: true,
          remaining: values[at + 1] as number,
          resetMs: (-1 - head) / 2,
          retryAfterMs: 0,
        };
        at += 2;
      }
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
