// redis-server killed with SIGKILL under load. Every decision returns within
// `timeoutMs` plus a margin as `onStoreError` says, nothing rejects and no rejection goes unhandled;
// after a restart, decisions come from Redis again, with no help from the application.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLimiter, ERROR_CODES, fixedWindow, RedisStore, type SluiceError } from '../../src/index.js';
import { CLIENT_KINDS, type ClientKind, type ClientSettings, connect } from '../helpers/clients.js';
import { latencySummary, type Sample, startLoad, watchUnhandledRejections } from '../helpers/load.js';
import { startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const TIMEOUT_MS = 50;
// The machine is shared and noisy: the bound asserted is generous, the figures measured are reported.
const MARGIN_MS = 5000;
const LIMIT = 40;
const WORKERS = 100;
const IDENTIFIERS = Array.from({ length: 50 }, (_, i) => `user-${i}`);

type Mode = 'allow' | 'deny' | 'fallback';

async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Whether the last `count` decisions, all made after `since`, came from Redis. */
function fromRedisAgain(samples: readonly Sample[], since: number, count: number): boolean {
  if (samples.length < count) return false;
  return samples.slice(-count).every((s) => s.startedAt > since && s.decision.reason === undefined);
}

async function outage(
  kind: ClientKind,
  mode: Mode,
  settings: ClientSettings,
  report: (line: string) => void,
) {
  // The fallback counts in the policy's 10-minute window, up to the restart: it must not end before then.
  if (mode === 'fallback') await clearOfWindowEnd(600_000, 30_000);
  const server = await startRedis();
  const connected = await connect(kind, server.port, '127.0.0.1', settings);
  const errors: SluiceError[] = [];
  const limiter = createLimiter({
    store: new RedisStore({ client: connected.client }),
    policy: fixedWindow({ limit: LIMIT, windowMs: 600_000 }),
    name: 'outage',
    timeoutMs: TIMEOUT_MS,
    onStoreError: mode,
    onError: (error) => errors.push(error),
  });
  const unhandled = watchUnhandledRejections();
  const load = startLoad(limiter, WORKERS, IDENTIFIERS);
  try {
    // Decisions come from Redis before the kill (on a busy machine the first may time out: wait for them).
    await waitFor(
      () => load.samples.some((s) => s.decision.reason === undefined),
      10_000,
      'decisions from Redis before the kill',
    );
    await sleep(300);
    const killedAt = performance.now();
    await server.kill('SIGKILL');
    const deadAt = performance.now();
    await sleep(600);
    // While down, an identifier of its own shows the policy plainly, call by call.
    const plain: boolean[] = [];
    for (let i = 0; i <= LIMIT; i++) plain.push((await limiter.limit('plain')).allowed);
    const restartedAt = performance.now();
    await server.restart();
    const upAt = performance.now();
    // The client reconnects on its own backoff (ioredis 6 waits up to 5 s between attempts).
    await waitFor(() => fromRedisAgain(load.samples, upAt, 200), 20_000, 'decisions from Redis again');
    const recoveredAt = performance.now();
    await load.stop();
    const samples = load.samples;

    // 1. Every decision, across the whole run, came back within timeoutMs plus the margin.
    // A loop, not Math.max(...): a fast outage records more samples than a call may take arguments.
    const slowest = samples.reduce((most, s) => Math.max(most, s.elapsedMs), 0);
    assert.ok(slowest <= TIMEOUT_MS + MARGIN_MS, `slowest decision took ${slowest.toFixed(1)} ms`);

    // 2. While the server was dead, every decision is the policy's, marked with a reason. A call
    // made just before the restart may be answered by the restarted server within timeoutMs (GLIDE
    // reconnects within milliseconds): only calls answered before the restart began count here.
    const during = samples.filter((s) => s.startedAt >= deadAt && s.startedAt + s.elapsedMs < restartedAt);
    assert.ok(during.length > 100, `only ${during.length} decisions during the outage`);
    for (const { decision } of during) {
      if (mode === 'fallback') {
        assert.equal(decision.reason, 'fallback');
      } else {
        assert.ok(
          decision.reason === 'store-error' || decision.reason === 'timeout',
          String(decision.reason),
        );
        assert.equal(decision.allowed, mode === 'allow');
        assert.equal(decision.retryAfterMs, mode === 'allow' ? 0 : 1000);
      }
      assert.equal(decision.limit, LIMIT);
    }
    if (mode === 'fallback') {
      // The in-process fallback enforces the same policy: at most LIMIT per identifier, then denials.
      for (const identifier of IDENTIFIERS) {
        const granted = during.filter((s) => s.identifier === identifier && s.decision.allowed).length;
        assert.ok(granted <= LIMIT, `${identifier}: ${granted} allowed by the fallback`);
      }
    }
    const expected = mode === 'allow' ? true : mode === 'deny' ? false : undefined;
    assert.deepEqual(
      plain,
      Array.from({ length: LIMIT + 1 }, (_, i) => expected ?? i < LIMIT),
    );

    // 3. The failures reached onError, typed; nothing rejected or went unhandled.
    assert.ok(errors.length > 0, 'onError saw the outage');
    for (const error of errors) {
      assert.ok(error.code === ERROR_CODES.STORE || error.code === ERROR_CODES.TIMEOUT, error.code);
    }
    assert.deepEqual(unhandled.seen, []);

    // 4. After the restart the decisions are Redis's: the new server holds the counters.
    // (waitFor above saw 200 decisions in a row made by Redis after the restart.)
    assert.ok(Number(await connected.command('DBSIZE')) > 0, 'the restarted server holds counters');

    const inFlight = samples.filter((s) => s.startedAt < killedAt && s.startedAt + s.elapsedMs > killedAt);
    const waited = during.filter((s) => s.elapsedMs >= TIMEOUT_MS - 1).length;
    report(
      `${kind} ${settings} settings, onStoreError=${mode}: decisions during the outage ${latencySummary(during)} ` +
        `(${waited} of ${during.length} waited for the timeout); in flight at the kill ${latencySummary(inFlight)}; ` +
        `whole run ${latencySummary(samples)}; back to Redis ${(recoveredAt - upAt).toFixed(0)} ms after the restart ` +
        `(restart took ${(upAt - restartedAt).toFixed(0)} ms); onError calls ${errors.length}`,
    );
  } finally {
    unhandled.dispose();
    await load.stop().catch(() => {});
    await connected.close();
    await server.stop();
  }
}

describe('SIGKILL under load', () => {
  for (const kind of CLIENT_KINDS) {
    for (const mode of ['allow', 'deny', 'fallback'] as const) {
      test(`${kind}, onStoreError ${mode}: decisions within timeoutMs, then from Redis after a restart`, async (t) => {
        await outage(kind, mode, 'sluice', (line) => t.diagnostic(line));
      });
    }
    test(`${kind} with the library's default settings (offline queue on): timeouts still bound every call`, async (t) => {
      // The client warns once about its settings; this test is about the limiter's bound, not the warning.
      const warnings = process.listeners('warning');
      process.removeAllListeners('warning');
      try {
        await outage(kind, 'allow', 'library', (line) => t.diagnostic(line));
      } finally {
        for (const listener of warnings) process.on('warning', listener);
      }
    });
  }
});
