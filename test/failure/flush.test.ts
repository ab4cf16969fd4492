// SCRIPT FLUSH and FUNCTION FLUSH in the middle of a run. The store loads its
// scripts again by itself: every decision still comes from Redis, no error reaches the caller or
// the hooks, and no request is counted twice.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLimiter, fixedWindow, RedisStore, type SluiceError } from '../../src/index.js';
import { connect } from '../helpers/clients.js';
import { startLoad, watchUnhandledRejections } from '../helpers/load.js';
import { startRedis } from '../helpers/redis-server.js';
import { fixedWindowCount } from '../helpers/stored.js';
import { VARIANTS } from '../helpers/suites.js';

const LIMIT = 2000;
const FLUSHES = 10;

/** `calls` of one command from INFO commandstats, e.g. `evalsha`; 0 when absent. */
function commandCalls(info: string, command: string): number {
  const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
  return match === null ? 0 : Number(match[1]);
}

describe('SCRIPT FLUSH and FUNCTION FLUSH under load', () => {
  for (const { kind, mode } of VARIANTS) {
    const flush = mode === 'scripts' ? ['SCRIPT', 'FLUSH'] : ['FUNCTION', 'FLUSH'];
    test(`${kind}, ${mode}: ${flush.join(' ')} ${FLUSHES} times mid-run, no error reaches the caller`, async (t) => {
      const server = await startRedis();
      const connected = await connect(kind, server.port);
      const admin = await connect(kind, server.port);
      const store = new RedisStore({ client: connected.client, mode });
      const errors: SluiceError[] = [];
      const limiter = createLimiter({
        store,
        policy: fixedWindow({ limit: LIMIT, windowMs: 600_000 }),
        name: 'flush',
        // Generous: this test is about reloading, and a timeout on a busy machine would hide an error as a reason.
        timeoutMs: 5000,
        onStoreError: 'deny',
        onError: (error) => errors.push(error),
      });
      const unhandled = watchUnhandledRejections();
      const hot = ['hot'];
      const load = startLoad(limiter, 100, [...hot, ...Array.from({ length: 20 }, (_, i) => `cold-${i}`)]);
      try {
        await sleep(100);
        for (let i = 0; i < FLUSHES; i++) {
          await admin.command(...flush);
          await sleep(30);
        }
        await sleep(100);
        await load.stop();
        const info = String(await admin.command('INFO', 'commandstats'));
        const samples = load.samples;

        assert.deepEqual(errors, []);
        assert.deepEqual(unhandled.seen, []);
        const notFromRedis = samples.filter((s) => s.decision.reason !== undefined);
        assert.deepEqual(notFromRedis, []);
        // No request counted twice: Redis's counters match what callers were told, key by key.
        for (const identifier of new Set(samples.map((s) => s.identifier))) {
          const allowed = samples.filter((s) => s.identifier === identifier && s.decision.allowed).length;
          const stored = fixedWindowCount(await admin.command('GET', store.keyFor('flush', identifier)));
          assert.equal(stored, allowed, identifier);
        }
        // The flushes did bite: the store had to load the scripts (or the library) again.
        const reloads =
          mode === 'scripts' ? commandCalls(info, 'script\\|load') : commandCalls(info, 'function\\|load');
        // (Two flushes with no call between them need one reload, hence not one per flush.)
        assert.ok(reloads >= FLUSHES / 2, `${reloads} reloads for ${FLUSHES} flushes`);
        t.diagnostic(
          `${kind} ${mode}: ${samples.length} decisions, all from Redis, across ${FLUSHES} flushes; ${reloads} ${mode === 'scripts' ? 'SCRIPT LOAD' : 'FUNCTION LOAD'} reloads`,
        );
      } finally {
        unhandled.dispose();
        await load.stop().catch(() => {});
        await admin.close();
        await connected.close();
        await server.stop();
      }
    });
  }
});
