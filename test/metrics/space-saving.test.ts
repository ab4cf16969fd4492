// The space-saving sketch: its error bound, its heavy-hitter guarantee, and its fixed size.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RecentHeavyHitters, SpaceSaving } from '../../src/metrics/index.js';
import { seeded } from '../helpers/random.js';

/** Feeds a stream to the sketch and to an exact count. */
function feed(sketch: SpaceSaving, stream: Iterable<string>): Map<string, number> {
  const exact = new Map<string, number>();
  for (const item of stream) {
    sketch.add(item);
    exact.set(item, (exact.get(item) ?? 0) + 1);
  }
  return exact;
}

/** A few heavy identifiers hidden in a long tail of distinct ones, in random order. */
function* attackStream(length: number, random: () => number): Generator<string> {
  for (let i = 0; i < length; i++) {
    const roll = random();
    if (roll < 0.1) yield '203.0.113.9';
    else if (roll < 0.16) yield '198.51.100.7';
    else if (roll < 0.2) yield `user-${Math.floor(random() * 3)}`;
    else yield `tail-${i}`;
  }
}

describe('SpaceSaving', () => {
  test('counts exactly while there are no more distinct items than counters', () => {
    const sketch = new SpaceSaving(4);
    const exact = feed(sketch, ['a', 'b', 'a', 'c', 'a', 'b', 'd']);
    assert.deepEqual(sketch.top(), [
      { identifier: 'a', count: 3, error: 0 },
      { identifier: 'b', count: 2, error: 0 },
      { identifier: 'c', count: 1, error: 0 },
      { identifier: 'd', count: 1, error: 0 },
    ]);
    assert.equal(exact.size, 4);
    assert.deepEqual(
      sketch.top(2).map((entry) => entry.identifier),
      ['a', 'b'],
    );
  });

  test('a new item takes the smallest counter and inherits its count as error', () => {
    const sketch = new SpaceSaving(2);
    feed(sketch, ['a', 'a', 'a', 'b', 'c']);
    // c replaced b (count 1): c counts 2, of which 1 may be b's.
    assert.deepEqual(sketch.top(), [
      { identifier: 'a', count: 3, error: 0 },
      { identifier: 'c', count: 2, error: 1 },
    ]);
  });

  test('over a million distinct identifiers it keeps its fixed size, bounds every error by total / capacity, and finds every heavy hitter', () => {
    const capacity = 20;
    const sketch = new SpaceSaving(capacity);
    const random = seeded(14).next;
    let largestSize = 0;
    const exact = new Map<string, number>();
    let n = 0;
    for (const item of attackStream(1_200_000, random)) {
      sketch.add(item);
      // The exact count is kept only for the heavy identifiers: the tail occurs once each.
      if (!item.startsWith('tail-')) exact.set(item, (exact.get(item) ?? 0) + 1);
      if (++n % 50_000 === 0) largestSize = Math.max(largestSize, sketch.size);
    }
    const distinct = n - [...exact.values()].reduce((a, b) => a + b, 0) + exact.size;
    assert.ok(distinct > 900_000, `${distinct} distinct identifiers`);
    assert.equal(sketch.total, 1_200_000);
    assert.equal(sketch.size, capacity);
    assert.equal(largestSize, capacity);

    const bound = sketch.total / capacity;
    const top = sketch.top();
    assert.equal(top.length, capacity);
    for (const entry of top) {
      const truth = entry.identifier.startsWith('tail-') ? 1 : (exact.get(entry.identifier) as number);
      assert.ok(entry.count >= truth, `${entry.identifier}: count ${entry.count} >= true ${truth}`);
      assert.ok(entry.count - entry.error <= truth, `${entry.identifier}: lower bound holds`);
      assert.ok(entry.error <= bound, `${entry.identifier}: error ${entry.error} <= ${bound}`);
    }
    // Every identifier seen more than total / capacity times holds a counter, the heaviest first.
    const heavy = [...exact].filter(([, count]) => count > bound).map(([identifier]) => identifier);
    assert.deepEqual(heavy.sort(), ['198.51.100.7', '203.0.113.9']);
    assert.deepEqual(
      top.slice(0, 2).map((entry) => entry.identifier),
      ['203.0.113.9', '198.51.100.7'],
    );
  });

  test('clear forgets everything', () => {
    const sketch = new SpaceSaving(3);
    feed(sketch, ['a', 'b', 'c', 'd']);
    sketch.clear();
    assert.deepEqual([sketch.size, sketch.total, sketch.top()], [0, 0, []]);
    feed(sketch, ['e']);
    assert.deepEqual(sketch.top(), [{ identifier: 'e', count: 1, error: 0 }]);
  });
});

describe('RecentHeavyHitters', () => {
  test('merges the current and the previous window, and forgets what is two rotations old', () => {
    const recent = new RecentHeavyHitters(4);
    for (const item of ['old', 'old', 'old', 'both']) recent.add(item);
    recent.rotate();
    for (const item of ['both', 'both', 'new']) recent.add(item);
    assert.deepEqual(recent.top(), [
      { identifier: 'both', count: 3, error: 0 },
      { identifier: 'old', count: 3, error: 0 },
      { identifier: 'new', count: 1, error: 0 },
    ]);
    recent.rotate();
    // 'old' and the first 'both' were two windows ago.
    assert.deepEqual(recent.top(), [
      { identifier: 'both', count: 2, error: 0 },
      { identifier: 'new', count: 1, error: 0 },
    ]);
    recent.rotate();
    assert.deepEqual(recent.top(), []);
  });

  test('over random streams with rotations, every true count of the last two windows lies within [count - error, count], and heavy hitters are listed', () => {
    const capacity = 10;
    const random = seeded(41).next;
    const recent = new RecentHeavyHitters(capacity);
    let windows: Array<Map<string, number>> = [new Map()];
    for (let window = 0; window < 12; window++) {
      const length = 500 + Math.floor(random() * 3000);
      const exact = windows[windows.length - 1] as Map<string, number>;
      for (const item of attackStream(length, random)) {
        // The heavy identifiers change from window to window.
        const named = item.startsWith('tail-') ? item : `${item}@${window % 3}`;
        recent.add(named);
        exact.set(named, (exact.get(named) ?? 0) + 1);
      }
      const truth = new Map<string, number>();
      for (const counts of windows.slice(-2)) {
        for (const [item, count] of counts) truth.set(item, (truth.get(item) ?? 0) + count);
      }
      const total = [...truth.values()].reduce((a, b) => a + b, 0);
      const top = recent.top();
      assert.ok(top.length <= 2 * capacity);
      for (const { identifier, count, error } of top) {
        const real = truth.get(identifier) ?? 0;
        assert.ok(
          real <= count && count - error <= real,
          `${identifier}: ${real} not in [${count - error}, ${count}]`,
        );
      }
      // An identifier with more than a capacity's share of either window is listed.
      for (const [item, count] of truth) {
        if (count > total / capacity)
          assert.ok(
            top.some((entry) => entry.identifier === item),
            item,
          );
      }
      recent.rotate();
      windows = [...windows.slice(-1), new Map()];
    }
  });
});
