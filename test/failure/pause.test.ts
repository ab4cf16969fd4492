// CLIENT PAUSE on the server. Calls give up at `timeoutMs`, replies that arrive
// afterwards (answers or errors) are dropped quietly, and the deadline costs no timer per call.
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';
import { describe, test } from 'node:test';
import { createLimiter, type Decision, fixedWindow, RedisStore, type SluiceError } from '../../src/index.js';
import { CLIENT_KINDS, connect } from '../helpers/clients.js';
import { watchUnhandledRejections } from '../helpers/load.js';
import { startRedis } from '../helpers/redis-server.js';
import { fixedWindowCount } from '../helpers/stored.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const TIMEOUT_MS = 50;
// Generous: a loaded machine can stall this process, and the bound is only there to say "not much longer".
const MARGIN_MS = 5000;
// Until CLIENT UNPAUSE: a WRITE pause holds scripts (every limiter call) but serves CLIENT UNPAUSE, so
// the pause ends when the test says, not after a time a loaded machine might overrun.
const PAUSE = ['CLIENT', 'PAUSE', '600000', 'WRITE'] as const;
const WAVE = 50;

interface Timed {
  readonly decision: Decision;
  readonly elapsedMs: number;
}

function timed(call: () => Promise<Decision>): Promise<Timed> {
  const startedAt = performance.now();
  return call().then((decision) => ({ decision, elapsedMs: performance.now() - startedAt }));
}

describe('CLIENT PAUSE', () => {
  for (const kind of CLIENT_KINDS) {
    test(`${kind}: calls give up at timeoutMs, late replies and late errors are dropped quietly`, async (t) => {
      // The late calls' counts are read in their 10-minute window: it must not end before then.
      await clearOfWindowEnd(600_000, 10_000);
      const server = await startRedis();
      const connected = await connect(kind, server.port);
      const admin = await connect(kind, server.port);
      const store = new RedisStore({ client: connected.client });
      const seen: Decision[] = [];
      const errors: SluiceError[] = [];
      const limiter = createLimiter({
        store,
        policy: fixedWindow({ limit: 10, windowMs: 600_000 }),
        name: 'pause',
        timeoutMs: TIMEOUT_MS,
        onStoreError: 'deny',
        onDecision: (decision) => seen.push(decision),
        onError: (error) => errors.push(error),
      });
      const unhandled = watchUnhandledRejections();
      try {
        // The first call loads the script; on a busy machine that may take longer than timeoutMs.
        while ((await limiter.peek('warm')).reason !== undefined);
        const decisionsAtStart = seen.length;
        const errorsAtStart = errors.length;

        await admin.command(...PAUSE);
        // Wave 1: the store looks healthy, so every call goes to Redis (as one coalesced script call) and waits.
        const callsBefore = store.calls;
        const wave1 = await Promise.all(
          Array.from({ length: WAVE }, (_, i) => timed(() => limiter.limit(`late-${i}`))),
        );
        assert.equal(store.calls - callsBefore, 1);
        for (const { decision, elapsedMs } of wave1) {
          assert.deepEqual(decision, {
            allowed: false,
            limit: 10,
            remaining: 0,
            resetMs: 1000,
            retryAfterMs: 1000,
            reason: 'timeout',
          });
          // Each waited for its deadline (timers fire on whole milliseconds), and not much longer.
          assert.ok(elapsedMs >= TIMEOUT_MS - 1, `gave up after ${elapsedMs.toFixed(1)} ms`);
          assert.ok(elapsedMs <= TIMEOUT_MS + MARGIN_MS, `gave up after ${elapsedMs.toFixed(1)} ms`);
        }
        // Wave 2, still paused: one call probes the store, the rest are answered without asking it.
        const wave2 = await Promise.all(
          Array.from({ length: WAVE }, (_, i) => timed(() => limiter.limit(`skip-${i}`))),
        );
        assert.equal(store.calls - callsBefore, 2);
        assert.ok(wave2.every((s) => s.decision.reason === 'timeout' && !s.decision.allowed));
        const waited = wave2.filter((s) => s.elapsedMs >= TIMEOUT_MS - 1).length;
        // One decision per call, and one timeout per call that went to the store (wave 1 and the probe).
        assert.equal(seen.length - decisionsAtStart, 2 * WAVE);
        assert.equal(errors.length - errorsAtStart, WAVE + 1);
        assert.ok(errors.slice(errorsAtStart).every((e) => e.code === 'ERR_SLUICE_TIMEOUT'));

        // The pause ends: the queued scripts run and their replies arrive, after their callers were answered.
        await admin.command('CLIENT', 'UNPAUSE');
        const decisionsAtPauseEnd = seen.length;
        let callsSince = 0;
        let after: Decision;
        do {
          callsSince++;
          after = await limiter.peek('late-0');
        } while (after.reason !== undefined);
        // The paused call for late-0 ran after all: one unit taken, reported by Redis now.
        assert.equal(after.remaining, 9);
        for (let i = 0; i < WAVE; i++) {
          assert.equal(fixedWindowCount(await admin.command('GET', store.keyFor('pause', `late-${i}`))), 1);
        }
        // The late replies made no decision of their own.
        assert.equal(seen.length - decisionsAtPauseEnd, callsSince);

        // A late error: calls time out during a pause, then the server dies under them.
        await admin.command(...PAUSE);
        const wave3 = await Promise.all(Array.from({ length: WAVE }, (_, i) => limiter.limit(`dying-${i}`)));
        assert.ok(wave3.every((d) => d.reason === 'timeout'));
        const decisionsBefore = seen.length;
        const errorsBefore = errors.length;
        await server.kill('SIGKILL');
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.equal(seen.length, decisionsBefore, 'the late errors made no decision');
        assert.equal(errors.length, errorsBefore, 'the late errors reached no hook');
        assert.deepEqual(unhandled.seen, []);

        t.diagnostic(
          `${kind}: wave 1 gave up after ${Math.min(...wave1.map((s) => s.elapsedMs)).toFixed(1)}-${Math.max(...wave1.map((s) => s.elapsedMs)).toFixed(1)} ms (timeoutMs ${TIMEOUT_MS}); ` +
            `wave 2: ${waited} of ${WAVE} waited (the probe), the rest answered in ≤ ${Math.max(...wave2.filter((s) => s.elapsedMs < TIMEOUT_MS - 1).map((s) => s.elapsedMs)).toFixed(2)} ms`,
        );
      } finally {
        unhandled.dispose();
        await admin.close();
        await connected.close();
        await server.stop();
      }
    });

    test(`${kind}: the deadline arms no timer per call`, async (t) => {
      const server = await startRedis();
      const connected = await connect(kind, server.port);
      const store = new RedisStore({ client: connected.client });
      const limiter = createLimiter({
        store,
        policy: fixedWindow({ limit: 1_000_000, windowMs: 600_000 }),
        name: 'timers',
        // Short enough that the sweep re-arms many times during the run; long enough for a busy machine.
        timeoutMs: 200,
      });
      try {
        while ((await limiter.peek('warm')).reason !== undefined);
        let timeouts = 0;
        const hook = createHook({
          init(_id, type) {
            if (type === 'Timeout') timeouts++;
          },
        });
        const callsBefore = store.calls;
        const rounds = 20;
        const perRound = 200;
        hook.enable();
        let fromRedis = 0;
        try {
          for (let round = 0; round < rounds; round++) {
            const decisions = await Promise.all(
              Array.from({ length: perRound }, (_, i) => limiter.limit(`id-${i}`)),
            );
            fromRedis += decisions.filter((d) => d.reason === undefined).length;
          }
        } finally {
          hook.disable();
        }
        const calls = store.calls - callsBefore;
        // The client library may arm a timer per command it writes (node-redis does); sluice adds at
        // most one per sweep of its deadline queue, not one per decision.
        assert.ok(
          timeouts <= calls + rounds,
          `${timeouts} timers for ${rounds * perRound} decisions (${calls} script calls)`,
        );
        assert.ok(timeouts < (rounds * perRound) / 10);
        assert.ok(fromRedis >= (rounds * perRound) / 2, `${fromRedis} decisions from Redis`);
        t.diagnostic(
          `${kind}: ${timeouts} timers created for ${rounds * perRound} decisions in ${calls} script calls`,
        );
      } finally {
        await connected.close();
        await server.stop();
      }
    });
  }
});
