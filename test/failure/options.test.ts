// The failure options: validated with named errors, documented defaults, and the same rules for any
// store (the limiter knows no Redis). The Redis side of each behaviour is in the other suites of test/failure.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  createLimiter,
  type Decision,
  ERROR_CODES,
  fixedWindow,
  gcra,
  LIMITER_DEFAULTS,
  MemoryStore,
  type Store,
  type StoreResult,
} from '../../src/index.js';

const base = () => ({ store: new MemoryStore(), policy: gcra({ limit: 5, periodMs: 1000 }), name: 'opts' });

/** A store that answers whenever the test says so (or never), to show the limiter's rules apply to any store. */
function manualStore(): Store & {
  answer(result: StoreResult): void;
  fail(error: unknown): void;
  calls: number;
} {
  const waiting: Array<{ resolve: (r: StoreResult) => void; reject: (e: unknown) => void }> = [];
  return {
    kind: 'manual',
    calls: 0,
    decide() {
      this.calls++;
      return new Promise<StoreResult>((resolve, reject) => waiting.push({ resolve, reject }));
    },
    reset: () => new Promise<void>(() => {}),
    keyFor: (name, identifier) => `${name}:${identifier}`,
    answer: (result) => {
      for (const w of waiting.splice(0)) w.resolve(result);
    },
    fail: (error) => {
      for (const w of waiting.splice(0)) w.reject(error);
    },
  };
}

describe('failure options', () => {
  test('defaults: fail open after 50 ms, no deny cache, enforcing, no stored limits read', () => {
    assert.deepEqual(LIMITER_DEFAULTS, {
      onStoreError: 'allow',
      timeoutMs: 50,
      denyCacheMaxEntries: 10_000,
      enforce: true,
      overrides: false,
    });
  });

  const bad: ReadonlyArray<[string, Record<string, unknown>, RegExp]> = [
    [
      'onStoreError',
      { onStoreError: 'open' },
      /Expected `onStoreError` to be 'allow', 'deny' or 'fallback', got "open"/,
    ],
    ['timeoutMs 0', { timeoutMs: 0 }, /Expected `timeoutMs` to be a positive integer, got 0 \(number\)/],
    ['timeoutMs 1.5', { timeoutMs: 1.5 }, /`timeoutMs`.*1.5 \(number\)/],
    ['timeoutMs too long', { timeoutMs: 2 ** 31 }, /`timeoutMs`.*at most 2147483647/],
    ['onDecision', { onDecision: 'log' }, /Expected `onDecision` to be a function, got "log"/],
    ['onError', { onError: {} }, /Expected `onError` to be a function, got an object/],
    ['denyCache', { denyCache: 100 }, /Expected `denyCache` to be true, false or \{ maxEntries \}, got 100/],
    [
      'denyCache.maxEntries',
      { denyCache: { maxEntries: 0 } },
      /Expected `denyCache.maxEntries` to be a positive integer/,
    ],
    ['denyCache typo', { denyCache: { maxEntry: 5 } }, /Unknown option `denyCache.maxEntry`/],
    ['enforce', { enforce: 'no' }, /Expected `enforce` to be true or false, got "no"/],
  ];
  for (const [label, options, message] of bad) {
    test(`rejects a bad ${label} at construction`, () => {
      assert.throws(
        () => createLimiter({ ...base(), ...options } as never),
        (error: Error & { code?: string }) =>
          error.code === ERROR_CODES.INVALID_OPTION && message.test(error.message),
      );
    });
  }

  test('undefined means the default, as for every option', async () => {
    const limiter = createLimiter({
      ...base(),
      onStoreError: undefined,
      timeoutMs: undefined,
      denyCache: undefined,
      enforce: undefined,
    } as never);
    assert.equal((await limiter.limit('x')).allowed, true);
  });

  test('timeoutMs holds for any store, and a store that answers late or fails is never seen by the caller', async () => {
    const store = manualStore();
    const errors: string[] = [];
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 5, windowMs: 1000 }),
      name: 'any',
      timeoutMs: 20,
      onStoreError: 'deny',
      onError: (error) => errors.push(error.code),
    });
    const late = await limiter.limit('x');
    assert.deepEqual([late.allowed, late.reason], [false, 'timeout']);
    // The store answers now: nobody is listening any more, and nothing happens.
    store.answer({ allowed: true, remaining: 4, resetMs: 1000, retryAfterMs: 0 });
    // Down: one probe goes to the store, the rest are answered at once.
    const [probe, skipped] = await Promise.all([limiter.limit('y'), limiter.limit('z')]);
    assert.equal(store.calls, 2);
    assert.deepEqual([probe.reason, skipped.reason], ['timeout', 'timeout']);
    // A probe that gets an answer brings the store back.
    const answered = limiter.limit('w');
    store.answer({ allowed: true, remaining: 4, resetMs: 1000, retryAfterMs: 0 });
    assert.equal((await answered).reason, undefined);
    // A store that throws a plain error: wrapped, typed, never rejected to the caller.
    const failing = limiter.limit('v');
    store.fail(new TypeError('socket gone'));
    const failed: Decision = await failing;
    assert.deepEqual([failed.allowed, failed.reason], [false, 'store-error']);
    assert.deepEqual(errors, ['ERR_SLUICE_TIMEOUT', 'ERR_SLUICE_TIMEOUT', 'ERR_SLUICE_STORE']);
    // reset has no decision to fall back on: it rejects with the timeout.
    await assert.rejects(limiter.reset('v'), { code: ERROR_CODES.TIMEOUT });
  });

  test('the deadline keeps the process alive only while a call waits', async () => {
    const refTimers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const store = manualStore();
    const limiter = createLimiter({
      store,
      policy: gcra({ limit: 5, periodMs: 1000 }),
      name: 'ref',
      timeoutMs: 60_000,
    });
    const before = refTimers();
    const waiting = limiter.limit('x');
    assert.equal(refTimers(), before + 1, 'a call waits: the timer holds the process');
    store.answer({ allowed: true, remaining: 4, resetMs: 200, retryAfterMs: 0 });
    assert.equal((await waiting).reason, undefined);
    // Answered: the timer stays armed for its sweep, but no longer holds the process for 60 s.
    assert.equal(refTimers(), before);
  });

  test('the memory store decides at once (no deadline), with the deny cache and shadow mode', async () => {
    let now = 1_000_000;
    const seen: Decision[] = [];
    const limiter = createLimiter({
      store: new MemoryStore(),
      policy: fixedWindow({ limit: 2, windowMs: 1000 }),
      name: 'mem',
      clock: () => now,
      denyCache: { maxEntries: 10 },
      enforce: false,
      onDecision: (d) => seen.push(d),
    });
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await limiter.limit('m'));
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.wouldAllow, d.reason]),
      [
        [true, true, undefined],
        [true, true, undefined],
        [true, false, undefined],
        [true, false, 'cached'],
      ],
    );
    assert.deepEqual(
      seen.map((d) => d.allowed),
      [true, true, false, false],
    );
    now += 1000;
    assert.equal((await limiter.limit('m')).wouldAllow, true);
  });
});
