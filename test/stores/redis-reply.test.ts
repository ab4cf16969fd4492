// The batch reply's records decode to results, and a reply that does not hold one record per key
// answers nobody (the store then rejects every call of the batch with ERR_SLUICE_BAD_REPLY).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { answerRecords } from '../../src/stores/redis/reply.js';
import type { StoreRequest, StoreResult } from '../../src/types.js';

/** Answers each item with its record of the reply, as the store answers a batch's requests. */
const settle = (items: ReadonlyArray<{ answer(result: StoreResult): void }>, reply: unknown): boolean =>
  answerRecords(
    reply,
    items.map(() => ({}) as StoreRequest),
    items.map((item) => ({ answered: (_, result) => item.answer(result), failed: () => {} })),
    0,
  );

function items(count: number): {
  results: Array<StoreResult | undefined>;
  items: Array<{ answer: (r: StoreResult) => void }>;
} {
  const results: Array<StoreResult | undefined> = Array.from({ length: count }, () => undefined);
  return {
    results,
    items: results.map((_, i) => ({
      answer: (result: StoreResult) => {
        results[i] = result;
      },
    })),
  };
}

describe('batch replies', () => {
  test('one, two and three integers: allowed with the shared reset, allowed with its own, denied', () => {
    const batch = items(3);
    // shared reset 500; 7 left; allowed with reset 120 and 3 left; denied with reset 900, 0 left, retry 40
    assert.equal(settle(batch.items, [500, 7, -1 - 2 * 120, 3, -2 - 2 * 900, 0, 40]), true);
    assert.deepEqual(batch.results, [
      { allowed: true, remaining: 7, resetMs: 500, retryAfterMs: 0 },
      { allowed: true, remaining: 3, resetMs: 120, retryAfterMs: 0 },
      { allowed: false, remaining: 0, resetMs: 900, retryAfterMs: 40 },
    ]);
  });

  test('a reset of 0 in either form', () => {
    const batch = items(2);
    assert.equal(settle(batch.items, [0, -1, 5, -2, 0, 1]), true);
    assert.deepEqual(batch.results, [
      { allowed: true, remaining: 5, resetMs: 0, retryAfterMs: 0 },
      { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 1 },
    ]);
  });

  test('packed (a first value below 0): an allowed key with its own reset is one integer, or one string', () => {
    const batch = items(5);
    const packed = (resetMs: number, remaining: number) => -1 - 2 * (resetMs * 2 ** 20 + remaining);
    // shared reset 500; 7 left; reset 120 with 3 left; reset 2^32 - 1 with 2^20 - 1 left; too large: text; denied
    const reply = [
      -1 - 500,
      7,
      packed(120, 3),
      packed(2 ** 32 - 1, 2 ** 20 - 1),
      '86400000 2000000',
      -2 - 2 * 900,
      0,
      40,
    ];
    assert.equal(settle(batch.items, reply), true);
    assert.deepEqual(batch.results, [
      { allowed: true, remaining: 7, resetMs: 500, retryAfterMs: 0 },
      { allowed: true, remaining: 3, resetMs: 120, retryAfterMs: 0 },
      { allowed: true, remaining: 2 ** 20 - 1, resetMs: 2 ** 32 - 1, retryAfterMs: 0 },
      { allowed: true, remaining: 2_000_000, resetMs: 86_400_000, retryAfterMs: 0 },
      { allowed: false, remaining: 0, resetMs: 900, retryAfterMs: 40 },
    ]);
  });

  for (const [what, reply] of [
    ['packed, a record followed by a stray integer', [-1, -1 - 2 * 5, 3, 4]],
    ['unpacked, an allowed record as text', [500, '120 3', 7]],
    ['packed, text that is not a record', [-1, '120', 7]],
  ] as const) {
    test(`${what}: nobody is answered`, () => {
      const batch = items(2);
      assert.equal(settle(batch.items, reply), false);
      assert.deepEqual(batch.results, [undefined, undefined]);
    });
  }

  for (const [what, reply] of [
    ['not an array', 'OK'],
    ['too few records', [500, 7]],
    ['a record cut short', [500, 7, -2 - 2 * 900, 0]],
    ['values left over', [500, 7, 8, 9]],
    ['a value that is not a number', [500, 7, '8']],
    ['a fraction', [500, 7, 8.5]],
    ['no shared reset', [undefined, 7, 8]],
  ] as const) {
    test(`${what}: nobody is answered`, () => {
      const batch = items(2);
      assert.equal(settle(batch.items, reply), false);
      assert.deepEqual(batch.results, [undefined, undefined]);
    });
  }
});
