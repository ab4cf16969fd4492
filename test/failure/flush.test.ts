// SCRIPT FLUSH and FUNCTION FLUSH in the middle of a run. The store loads its
// scripts again by itself: every decision still comes from Redis, no error reaches the caller or
// the hooks, and no request is counted twice.
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLimiter, fixedWindow, RedisStore, type SluiceError } from '../../src/index.js';
import { type ClientKind, type Connected, connect } from '../helpers/clients.js';
import { startLoad, watchUnhandledRejections } from '../helpers/load.js';
import { startRedis } from '../helpers/redis-server.js';
import { fixedWindowCount } from '../helpers/stored.js';
import { VARIANTS } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const LIMIT = 2000;
const FLUSHES = 10;

// Each test compares what Redis counted in a 10-minute window with what callers were told: it must not end meanwhile.
beforeEach(() => clearOfWindowEnd(600_000, 10_000));

/** `calls` of one command from INFO commandstats, e.g. `evalsha`; 0 when absent. */
function commandCalls(info: string, command: string): number {
  const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
  return match === null ? 0 : Number(match[1]);
}

/** Whether a command (as the client library is handed it) loads scripts or the function library. */
function isLoad(args: readonly unknown[]): boolean {
  return /^(SCRIPT|FUNCTION)$/i.test(String(args[0])) && /^LOAD$/i.test(String(args[1]));
}

/**
 * Makes `connected`'s client flush the server (through `admin`, another connection) after each
 * load has run and before the store sees its reply: every resend that follows a load meets a
 * server that has lost it again, the flush timed where a flush from elsewhere can land by chance.
 */
function flushAfterEachLoad(
  connected: Connected,
  admin: Connected,
  flush: readonly string[],
): { loads: number } {
  const seen = { loads: 0 };
  const after = async (args: readonly unknown[], reply: unknown): Promise<unknown> => {
    if (isLoad(args)) {
      seen.loads++;
      await admin.command(...flush);
    }
    return reply;
  };
  const client = connected.client as Record<string, (...args: never[]) => Promise<unknown>>;
  const method: Record<ClientKind, string> = {
    ioredis: 'call',
    iovalkey: 'call',
    'node-redis': 'sendCommand',
    'valkey-glide': 'customCommand',
  };
  const name = method[connected.kind];
  const original = (client[name] as (...args: unknown[]) => Promise<unknown>).bind(client);
  // ioredis is handed (command, ...args); node-redis and GLIDE an array (and GLIDE its options).
  const commandOf = (args: unknown[]): unknown[] => (Array.isArray(args[0]) ? (args[0] as unknown[]) : args);
  client[name] = ((...args: unknown[]) =>
    original(...args).then((reply) => after(commandOf(args), reply))) as (
    ...args: never[]
  ) => Promise<unknown>;
  return seen;
}

describe('a flush between each load and the resend', () => {
  for (const { kind, mode } of VARIANTS) {
    const flush = mode === 'scripts' ? ['SCRIPT', 'FLUSH'] : ['FUNCTION', 'FLUSH'];
    test(`${kind}, ${mode}: every call is answered by Redis, once and in order, within three sends`, async () => {
      const server = await startRedis();
      const connected = await connect(kind, server.port);
      const admin = await connect(kind, server.port);
      const loads = flushAfterEachLoad(connected, admin, flush);
      const store = new RedisStore({ client: connected.client, mode });
      const errors: SluiceError[] = [];
      const limiter = createLimiter({
        store,
        policy: fixedWindow({ limit: 10, windowMs: 600_000 }),
        name: 'timed',
        timeoutMs: 60_000,
        onStoreError: 'deny',
        onError: (error) => errors.push(error),
      });
      try {
        // Five calls for one key, each made in a tick of its own (so a batch of its own), while the
        // earlier ones are still being repaired.
        const pending = [];
        for (let i = 0; i < 5; i++) {
          pending.push(limiter.limit('k'));
          await new Promise((resolve) => setImmediate(resolve));
        }
        const decisions = await Promise.all(pending);

        assert.deepEqual(errors, []);
        assert.deepEqual(
          decisions.map((d) => [d.allowed, d.remaining, d.reason]),
          [9, 8, 7, 6, 5].map((remaining) => [true, remaining, undefined]),
          'each call answered by Redis, in the order made',
        );
        assert.equal(fixedWindowCount(await admin.command('GET', store.keyFor('timed', 'k'))), 5);
        // Every load was followed by a flush, and no send was made beyond the third of its call.
        assert.ok(loads.loads >= 2, `${loads.loads} loads`);
        assert.ok(store.calls <= 5 * 3, `${store.calls} sends for 5 calls`);
        // What answered them: the third send, carrying the body, which no flush can take away.
        const info = String(await admin.command('INFO', 'commandstats'));
        assert.ok(commandCalls(info, 'eval') >= 1, 'a third send with EVAL');
      } finally {
        await admin.close();
        await connected.close();
        await server.stop();
      }
    });
  }
});

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
