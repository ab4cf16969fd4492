// A slot that comes much later than its time (the process stalled past it: here a synchronous busy
// loop) is let go and a new one taken, by wait() and by throttle(): the calls that held slots
// during the stall do not all go at once when it ends, but one at a time, at the policy's pace.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import { createLimiter, gcra, type Limiter, type Store } from '../../src/index.js';
import { decisionMetrics } from '../../src/metrics/index.js';
import { throttle } from '../../src/throttle/index.js';
import { type Backend, openBackend } from '../helpers/backends.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { EXACT, unique } from '../helpers/suites.js';

/** 10 per second, one at a time: slots 100 ms apart, and no burst. */
const INTERVAL_MS = 100;
/** Calls that wait together: the first goes at once, the others hold slots 100, 200, 300, 400 ms on. */
const CALLS = 5;
/** The stall: well past the last slot held, and past the late bound (100 ms, one interval). */
const STALL_MS = 900;

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // A synchronous task: no timer fires, no reply is read.
  }
}

/**
 * Stalls the process once the first call went, then counts what went within half an interval of
 * the stall's end (a timer set when the stall ends: a slot taken after it cannot come before it).
 */
async function stallAndCount(went: () => number, all: Promise<unknown>): Promise<number> {
  while (went() < 1) await new Promise((resolve) => setImmediate(resolve));
  const before = went();
  busyFor(STALL_MS);
  await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS / 2));
  const atOnce = went() - before;
  await all;
  return atOnce;
}

function limiterOn(store: Store, metrics: ReturnType<typeof decisionMetrics>): Limiter {
  return createLimiter({
    store,
    policy: gcra({ limit: 10, periodMs: 1000, burst: 1 }),
    name: unique('late'),
    metrics,
    ...EXACT,
  });
}

/** Slots the store handed out (`schedule` decisions allowed): one per call, one more per slot let go late. */
function slotsTaken(metrics: ReturnType<typeof decisionMetrics>, limiter: string): number {
  return metrics.snapshot().find((m) => m.limiter === limiter)?.decisions.allowed ?? 0;
}

for (const kind of ['memory', 'ioredis'] as const) {
  describe(`a slot that comes late, on ${kind}`, () => {
    let backend: Backend;
    before(async () => {
      backend = await openBackend(kind, server);
    });
    after(async () => {
      await backend.close();
    });

    test('wait(): the waits whose slots passed during a stall take new ones, and go one at a time', async () => {
      const metrics = decisionMetrics();
      const limiter = limiterOn(backend.store, metrics);
      let went = 0;
      const waits = Array.from({ length: CALLS }, () =>
        limiter.wait('a').then((decision) => {
          went++;
          return decision;
        }),
      );
      const atOnce = await stallAndCount(() => went, Promise.all(waits));
      const decisions = await Promise.all(waits);
      assert.deepEqual(
        decisions.map((d) => d.allowed),
        Array(CALLS).fill(true),
      );
      // Used late, the four slots held through the stall would all go at its end.
      assert.ok(atOnce <= 1, `${atOnce} waits went within ${INTERVAL_MS / 2} ms of the stall's end`);
      const taken = slotsTaken(metrics, limiter.name);
      assert.ok(taken >= CALLS + 3, `${taken} slots taken for ${CALLS} waits: the late ones were replaced`);
    });

    test('throttle(): the slots a lane held through a stall are replaced, and the calls go at the pace', async () => {
      const metrics = decisionMetrics();
      const limiter = limiterOn(backend.store, metrics);
      const calls = throttle({ limiter });
      let went = 0;
      const runs = Array.from({ length: CALLS }, () =>
        calls.run(() => {
          went++;
        }),
      );
      const atOnce = await stallAndCount(() => went, Promise.all(runs));
      assert.equal(went, CALLS, 'every call was made');
      assert.ok(atOnce <= 1, `${atOnce} calls went within ${INTERVAL_MS / 2} ms of the stall's end`);
      const taken = slotsTaken(metrics, limiter.name);
      assert.ok(taken >= CALLS + 3, `${taken} slots taken for ${CALLS} calls: the late ones were replaced`);
    });
  });
}
