// throttle() in one process, on the memory store: what an upstream's answer asks (Retry-After, the
// rate-limit fields sluice writes and others), priorities, aborts, maxWaitMs, retries, bad options.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createLimiter, ERROR_CODES, fixedWindow, gcra, type Limiter, MemoryStore } from '../../src/index.js';
import { throttle } from '../../src/throttle/index.js';
import { pauseOf, retryAfterMs } from '../../src/throttle/upstream.js';
import { isCode } from '../helpers/errors.js';
import { unique } from '../helpers/suites.js';

const NOW = Date.UTC(2026, 0, 1);

function answer(status: number, headers: Record<string, string>) {
  return { status, header: (name: string) => headers[name] };
}

describe("what an upstream's answer asks", () => {
  test('Retry-After in seconds or as an HTTP date', () => {
    assert.equal(retryAfterMs('2', NOW), 2000);
    assert.equal(retryAfterMs(new Date(NOW + 5000).toUTCString(), NOW), 5000);
    assert.equal(retryAfterMs('soon', NOW), undefined);
  });
  test('429 and 503 with Retry-After refuse the call and pause; a bare 429 pauses a second; a bare 503 is an error', () => {
    assert.deepEqual(pauseOf(answer(429, { 'retry-after': '2' }), NOW), { pauseMs: 2000, refused: true });
    assert.deepEqual(pauseOf(answer(503, { 'retry-after': '3' }), NOW), { pauseMs: 3000, refused: true });
    assert.deepEqual(pauseOf(answer(429, {}), NOW), { pauseMs: 1000, refused: true });
    assert.equal(pauseOf(answer(503, {}), NOW), undefined);
    assert.equal(pauseOf(answer(200, {}), NOW), undefined);
  });
  test('rate-limit fields with nothing left pause until they say it comes back, in each style sluice writes', () => {
    const styles: Array<[Record<string, string>, number | undefined]> = [
      [{ ratelimit: '"api";r=0;t=30' }, 30_000],
      [{ ratelimit: '"100-in-1min"; r=0; t=12, "5-in-1sec"; r=3; t=1' }, 12_000],
      [{ ratelimit: '"api";r=4;t=30' }, undefined],
      [{ ratelimit: 'limit=100, remaining=0, reset=7' }, 7000],
      [{ 'ratelimit-remaining': '0', 'ratelimit-reset': '9' }, 9000],
      [{ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(NOW / 1000 + 4) }, 4000],
    ];
    for (const [headers, pauseMs] of styles) {
      const pause = pauseOf(answer(200, headers), NOW);
      assert.deepEqual(
        pause,
        pauseMs === undefined ? undefined : { pauseMs, refused: false },
        JSON.stringify(headers),
      );
    }
  });
});

function paced(perSecond: number): Limiter {
  return createLimiter({
    store: new MemoryStore(),
    policy: gcra({ limit: perSecond, periodMs: 1000, burst: 1 }),
    name: unique('throttle'),
  });
}

describe('throttle() in one process', () => {
  test('calls waiting on a key go highest priority first, then in the order they came', async () => {
    const calls = throttle({ limiter: paced(100) });
    const started: string[] = [];
    const run = (label: string, priority: number) => calls.run(() => void started.push(label), { priority });
    await Promise.all([
      run('a', 0),
      run('b', 0),
      run('urgent', 5),
      run('c', 0),
      run('late', -1),
      run('soon', 5),
    ]);
    assert.deepEqual(started, ['urgent', 'soon', 'a', 'b', 'c', 'late']);
  });

  test('an aborted call rejects with its reason and is not made; the others go on', async () => {
    const calls = throttle({ limiter: paced(50) });
    const made: number[] = [];
    const controller = new AbortController();
    const first = calls.run(() => made.push(1));
    const second = calls.run(() => made.push(2), { signal: controller.signal });
    const third = calls.run(() => made.push(3));
    controller.abort(new Error('gave up'));
    await assert.rejects(second, /gave up/);
    await Promise.all([first, third]);
    assert.deepEqual(made, [1, 3]);
  });

  test('a call that gets no slot within maxWaitMs rejects with ERR_SLUICE_MAX_WAIT and is not made', async () => {
    const calls = throttle({ limiter: paced(10), maxWaitMs: 150 });
    const made: number[] = [];
    const results = await Promise.allSettled([1, 2, 3, 4, 5].map((n) => calls.run(() => made.push(n))));
    const refused = results.filter((result) => result.status === 'rejected');
    assert.ok(refused.length >= 2, `${refused.length} refused`);
    for (const result of refused)
      assert.ok(isCode(ERROR_CODES.MAX_WAIT)((result as PromiseRejectedResult).reason));
    assert.equal(made.length, 5 - refused.length);
  });

  test('a refused call is made again up to `retries` times, then its answer is returned as it came', async () => {
    const calls = throttle({ limiter: paced(1000), retries: 2 });
    let tries = 0;
    const refused = () => {
      tries++;
      return new Response('slow down', { status: 429, headers: { 'retry-after': '0' } });
    };
    const last = await calls.run(refused);
    assert.equal(last.status, 429);
    assert.equal(tries, 3, 'the call and two retries');
    // An error that carries the answer (axios, got) is read the same way.
    let thrown = 0;
    const value = await calls.run(() => {
      thrown++;
      if (thrown === 1)
        throw Object.assign(new Error('429'), { response: { status: 429, headers: { 'retry-after': '0' } } });
      return 'done';
    });
    assert.equal(value, 'done');
    assert.equal(thrown, 2);
  });

  test('a refused call whose next try gets no slot within maxWaitMs answers the refusal as it came', async () => {
    // The upstream asks for 5 s; the throttle waits at most 1 s: the call is not made again.
    const calls = throttle({ limiter: paced(1000), maxWaitMs: 1000, retries: 2 });
    let tries = 0;
    const refusal = new Response('slow down', { status: 429, headers: { 'retry-after': '5' } });
    const answer = await calls.run(() => {
      tries++;
      return refusal;
    });
    assert.equal(answer, refusal, 'the very answer the upstream gave');
    assert.equal(await answer.text(), 'slow down', 'its body unread');
    assert.equal(tries, 1);
    // A call never made still rejects: the pause holds the key for 5 s.
    let made = 0;
    await assert.rejects(
      calls.run(() => made++),
      isCode(ERROR_CODES.MAX_WAIT),
    );
    assert.equal(made, 0);
  });

  test('fetch() sends a Request again after a refusal (a copy of it each time)', async () => {
    const bodies: string[] = [];
    const fake: typeof fetch = async (input) => {
      bodies.push(await (input as Request).text());
      return bodies.length === 1
        ? new Response('', { status: 429, headers: { 'retry-after': '0' } })
        : new Response('ok');
    };
    const calls = throttle({ limiter: paced(1000), fetch: fake });
    const response = await calls.fetch(
      new Request('http://upstream.test/', { method: 'POST', body: 'order 42' }),
    );
    assert.equal(await response.text(), 'ok');
    assert.deepEqual(bodies, ['order 42', 'order 42']);
  });

  test('bad options are refused at construction, naming the option', () => {
    const windowed = createLimiter({
      store: new MemoryStore(),
      policy: fixedWindow({ limit: 5, windowMs: 1000 }),
      name: 'w',
    });
    assert.throws(
      () => throttle({ limiter: windowed }),
      isCode(ERROR_CODES.INVALID_OPTION, /`limiter`.*gcra or tokenBucket/),
    );
    assert.throws(
      () => throttle({ limiter: paced(5), retries: -1 }),
      isCode(ERROR_CODES.INVALID_OPTION, /`retries`/),
    );
    assert.throws(
      () => throttle({ limiter: paced(5), key: '' }),
      isCode(ERROR_CODES.INVALID_IDENTIFIER, /`key`/),
    );
    assert.throws(
      () => throttle({ limiter: paced(5), maxWaitMs: 'soon' as never }),
      isCode(ERROR_CODES.INVALID_OPTION, /`maxWaitMs`/),
    );
  });
});
