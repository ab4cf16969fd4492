// Replies that prove a script did not run are repaired and resent in order: after NOSCRIPT (or a lost
// function library) the store loads the scripts and sends again, holding later calls behind the
// resends, so one key's decisions stay exact and in call order; READONLY is resent, a few times at most.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { createLimiter, type Decision, fixedWindow, RedisStore, SluiceError } from '../../src/index.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { fixedWindowCount } from '../helpers/stored.js';
import { oneUnit, openVariant, VARIANTS } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const PATIENT_MS = 60_000;
const HOUR = 3_600_000;

let server: RedisServer;
before(async () => {
  // Replicas started by the READONLY tests sync at once.
  server = await startRedis({ args: ['--repl-diskless-sync-delay', '0'] });
});
after(async () => {
  await server.stop();
});

describe('a flush with many calls for one key in flight', () => {
  // Each test's 300 calls, in call order, and the stored count read after them must fall in one hour's window.
  beforeEach(() => clearOfWindowEnd(HOUR, 30_000));

  for (const { kind, mode } of VARIANTS) {
    test(`${kind} ${mode}: every call decided by Redis, counted once, in call order`, async () => {
      const prefix = `order-${kind}-${mode}`;
      const { connected } = await openVariant(kind, mode, server.port, prefix);
      // One call per decision: many separate calls for the key are in flight at once.
      const store = new RedisStore({ client: connected.client, prefix, mode, maxBatch: 1 });
      const limiter = createLimiter({
        store,
        policy: fixedWindow({ limit: 10_000, windowMs: HOUR }),
        name: 'order',
        timeoutMs: PATIENT_MS,
      });
      try {
        await limiter.limit('warm-up'); // the scripts are loaded: the flush is what removes them
        await connected.command(...(mode === 'scripts' ? ['SCRIPT', 'FLUSH'] : ['FUNCTION', 'FLUSH']));
        const pending: Array<Promise<Decision>> = [];
        // 100 calls sent together, all meeting the missing script; then one more call per turn of
        // the event loop while the store reloads, which must not overtake the resends.
        for (let i = 0; i < 100; i++) pending.push(limiter.limit('hot'));
        for (let i = 0; i < 200; i++) {
          pending.push(limiter.limit('hot'));
          await tick();
        }
        const decisions = await Promise.all(pending);
        assert.deepEqual(
          decisions.filter((decision) => decision.reason !== undefined),
          [],
          'every decision from Redis',
        );
        // In call order: the n-th call saw n - 1 earlier units taken. Valkey GLIDE runs concurrent
        // commands in an order of its own (even plain INCRs): with it, each count is seen once.
        const remaining = decisions.map((decision) => decision.remaining);
        if (kind === 'valkey-glide') remaining.sort((x, y) => y - x);
        const expected = Array.from({ length: decisions.length }, (_, i) => 10_000 - 1 - i);
        assert.deepEqual(remaining, expected, 'in call order');
        const stored = fixedWindowCount(await connected.command('GET', store.keyFor('order', 'hot')));
        assert.equal(stored, decisions.length, 'each counted once');
      } finally {
        await connected.close();
      }
    });
  }
});

describe('READONLY (a primary demoted to a replica)', () => {
  // Valkey GLIDE refuses to connect to a replica alone ("No primary node found").
  for (const { kind, mode } of VARIANTS.filter((variant) => variant.kind !== 'valkey-glide')) {
    test(`${kind} ${mode}: resent, since the script wrote nothing; three sends at most, then the caller sees it`, async () => {
      const replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(server.port)] });
      const { connected, store } = await openVariant(kind, mode, replica.port, `ro-${kind}-${mode}`);
      try {
        if (mode === 'functions') {
          // The library arrives by replication, so the replica refuses the write, not the name.
          const primary = await openVariant(kind, mode, server.port, `ro-${kind}-${mode}`);
          await createLimiter({
            store: primary.store,
            policy: fixedWindow({ limit: 5, windowMs: HOUR }),
            name: 'ro',
            timeoutMs: PATIENT_MS,
          }).limit('load');
          await primary.connected.close();
          for (let i = 0; i < 500; i++) {
            const list = (await connected.command('FUNCTION', 'LIST')) as unknown[];
            if (list.length > 0) break;
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        }
        const request = oneUnit('ro', 'a');
        const before = store.calls;
        await assert.rejects(store.decide(request), (error: unknown) => {
          assert.ok(error instanceof SluiceError);
          assert.match(error.message, /READONLY|ReadOnly/);
          return true;
        });
        const sends = store.calls - before;
        // scripts: the first EVALSHA may meet NOSCRIPT on a fresh replica (a load, then again).
        assert.ok(sends >= 3 && sends <= 4, `${sends} sends`);
        assert.equal(await connected.command('EXISTS', store.keyFor('ro', 'a')), 0, 'nothing written');
      } finally {
        await connected.close();
        await replica.stop();
      }
    });
  }
});
