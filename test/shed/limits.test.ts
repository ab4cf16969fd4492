// The limit algorithms on windows fed by hand: what each one answers to latency, drops and idle capacity.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ERROR_CODES } from '../../src/errors.js';
import { type LimitWindow, resolveLimit } from '../../src/shed/index.js';
import { isCode } from '../helpers/errors.js';

function window(rttMs: number, maxInFlight: number, extra: Partial<LimitWindow> = {}): LimitWindow {
  return { samples: 10, rttMs, minRttMs: rttMs, maxInFlight, dropped: false, refused: 0, ...extra };
}

/** Feeds `count` windows built from the limit before each, and answers the limits after each. */
function feed(
  limit: ReturnType<typeof resolveLimit>,
  count: number,
  make: (limit: number) => LimitWindow,
): number[] {
  const seen: number[] = [];
  for (let i = 0; i < count; i += 1) seen.push(limit.algorithm.update(make(limit.algorithm.limit)));
  return seen;
}

describe('gradient2', () => {
  test('grows by the queue while latency holds, shrinks by the latency ratio when it rises', () => {
    const limit = resolveLimit({ algorithm: 'gradient2', initial: 20, smoothing: 1, tolerance: 1.5 });
    // Busy and as fast as ever: gradient 1, L' = L + queue (4).
    assert.deepEqual(
      feed(limit, 3, (l) => window(50, l)),
      [24, 28, 32],
    );
    // Twice the long-run latency with tolerance 1.5: gradient 0.75, no queue added: 32 · 0.75 = 24.
    assert.equal(limit.algorithm.update(window(100, 32, { refused: 5 })), 24);
  });
  test('a window with a drop halves the target; smoothing moves a fifth of the way', () => {
    const limit = resolveLimit({ algorithm: 'gradient2', initial: 100 });
    // 100 · 0.8 + (100 · 0.5) · 0.2 = 90
    assert.equal(limit.algorithm.update(window(50, 100, { dropped: true })), 90);
  });
  test('half the limit unused: latency says nothing, the limit stays', () => {
    const limit = resolveLimit({ algorithm: 'gradient2', initial: 40, smoothing: 1 });
    assert.deepEqual(
      feed(limit, 3, () => window(50, 10)),
      [40, 40, 40],
    );
  });
  test('a long overload does not teach the average that its queue is normal: the limit stays bounded', () => {
    // A service with 10 slots and 50 ms of work: latency = 50 · max(1, L / 10).
    const limit = resolveLimit({ algorithm: 'gradient2', initial: 10, smoothing: 1 });
    const limits = feed(limit, 3000, (l) => window(50 * Math.max(1, l / 10), l, { refused: 10 }));
    const last = limits.slice(-100);
    assert.ok(Math.max(...last) <= 20, `limit stayed within 2x the slots: ${Math.max(...last)}`);
    assert.ok(Math.min(...last) >= 10, `and used them all: ${Math.min(...last)}`);
  });
  test('by default the service behind queues about a quarter of its slots: the limit settles under 1.4x them', () => {
    // 10 slots, 50 ms of work, every window refusing: latency = 50 · max(1, L / 10).
    const limit = resolveLimit({ algorithm: 'gradient2', initial: 10 });
    const last = feed(limit, 500, (l) => window(50 * Math.max(1, l / 10), l, { refused: 10 })).slice(-100);
    assert.ok(
      Math.max(...last) <= 14 && Math.min(...last) >= 10,
      `${Math.min(...last)}..${Math.max(...last)}`,
    );
  });
  test("starting above capacity, the first window's queue is not taken for the service's usual latency", () => {
    // 10 slots of 50 ms, and a limit of 20 from the start: the first window's later requests queued (mean 90 ms).
    const limit = resolveLimit({ algorithm: 'gradient2', initial: 20 });
    limit.algorithm.update(window(90, 20, { minRttMs: 50, refused: 10 }));
    const last = feed(limit, 500, (l) => window(50 * Math.max(1, l / 10), l, { refused: 10 })).slice(-100);
    assert.ok(Math.max(...last) <= 14, `settled at ${Math.min(...last)}..${Math.max(...last)} for 10 slots`);
  });
  test('a service that became slower for good is learnt at the min bound, and the limit grows back', () => {
    const limit = resolveLimit({ algorithm: 'gradient2', initial: 10, min: 2, smoothing: 1 });
    feed(limit, 50, (l) => window(50 * Math.max(1, l / 10), l, { refused: 10 }));
    // From now on every request takes 200 ms, at any concurrency up to 10.
    const limits = feed(limit, 400, (l) => window(200 * Math.max(1, l / 10), l, { refused: 10 }));
    assert.ok(limits.includes(2), 'it fell to the min bound first');
    assert.ok((limits.at(-1) as number) >= 10, `then grew back: ${limits.at(-1)}`);
  });
});

describe('vegas', () => {
  test('no queue: grows by beta · log10(L); a long queue: shrinks by log10(L)', () => {
    const limit = resolveLimit({ algorithm: 'vegas', initial: 100 });
    // First window sets the no-load latency (50 ms); queue 0 ≤ log10(100) = 2: L + 6 · 2 = 112.
    assert.equal(limit.algorithm.update(window(50, 100)), 112);
    // 112 · (1 − 50 / 100) = 56 queued > beta · log10(112) ≈ 12.3: 112 − 2.05 = 109.95.
    assert.equal(limit.algorithm.update(window(100, 112, { minRttMs: 80 })), 109);
  });
  test('a queue between alpha and beta holds the limit', () => {
    const limit = resolveLimit({ algorithm: 'vegas', initial: 10 });
    limit.algorithm.update(window(50, 10)); // no-load 50 ms; grows to 16
    // 16 · (1 − 50 / 60) = 2.67 → 3: not ≤ 1.2, under alpha (3.6): + log10(16).
    assert.equal(limit.algorithm.update(window(60, 16, { minRttMs: 55 })), 17);
    // 17 · (1 − 50 / 80) = 6.4 → 7: between alpha (3.7) and beta (7.4): holds.
    assert.equal(limit.algorithm.update(window(80, 17, { minRttMs: 70 })), 17);
  });
  test('the limit settles near the slots of a service with 10 slots', () => {
    // It starts below the slots, so that its first window measures the no-load latency.
    const limit = resolveLimit({ algorithm: 'vegas', initial: 5 });
    const limits = feed(limit, 500, (l) => window(50 * Math.max(1, l / 10), l));
    const last = limits.slice(-50);
    assert.ok(
      Math.max(...last) <= 20 && Math.min(...last) >= 10,
      `${Math.min(...last)}..${Math.max(...last)}`,
    );
  });
});

describe('aimd', () => {
  test('one more per busy window, times backoffRatio on a drop or a window slower than timeoutMs', () => {
    const limit = resolveLimit({ algorithm: 'aimd', initial: 10, timeoutMs: 1000 });
    assert.deepEqual(
      feed(limit, 3, (l) => window(50, l)),
      [11, 12, 13],
    );
    assert.equal(limit.algorithm.update(window(50, 13, { dropped: true })), 11); // 13 · 0.9 = 11.7
    assert.equal(limit.algorithm.update(window(1500, 11)), 10); // 11.7 · 0.9 = 10.53
    assert.equal(limit.algorithm.update(window(50, 2)), 10); // idle: unchanged
  });
  test('min and max bound it', () => {
    const limit = resolveLimit({ algorithm: 'aimd', initial: 3, min: 2, max: 4 });
    assert.deepEqual(
      feed(limit, 3, (l) => window(50, l)),
      [4, 4, 4],
    );
    assert.deepEqual(
      feed(limit, 5, (l) => window(50, l, { dropped: true })),
      [3, 3, 2, 2, 2],
    );
  });
});

describe('the limit option', () => {
  test('names and defaults', () => {
    assert.equal(resolveLimit(undefined).algorithm.name, 'gradient2');
    assert.equal(resolveLimit('vegas').algorithm.limit, 20);
    assert.deepEqual([resolveLimit('aimd').windowMs, resolveLimit('aimd').windowSamples], [100, 10]);
  });
  test('bad values throw ERR_SLUICE_INVALID_OPTION naming the option', () => {
    const cases: Array<[unknown, RegExp]> = [
      ['cubic', /`limit`.*'gradient2', 'vegas' or 'aimd'.*"cubic"/],
      [{ algorithm: 'vegas', initial: 0 }, /`limit.initial`/],
      [{ algorithm: 'vegas', min: 5, max: 4 }, /`limit.max`/],
      [{ algorithm: 'vegas', min: 5, initial: 3 }, /`limit.initial`/],
      [{ algorithm: 'gradient2', tolerance: 0.5 }, /`limit.tolerance`/],
      [{ algorithm: 'aimd', backoffRatio: 1 }, /`limit.backoffRatio`/],
      [{ algorithm: 'aimd', tolerance: 2 }, /Unknown option `limit.tolerance`/],
      [{ algorithm: 'vegas', windowMs: 0 }, /`limit.windowMs`/],
    ];
    for (const [option, message] of cases) {
      assert.throws(() => resolveLimit(option as never), isCode(ERROR_CODES.INVALID_OPTION, message));
    }
  });
});
