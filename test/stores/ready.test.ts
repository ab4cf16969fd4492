// A store's first connection: decisions made before it wait for it (up to connectTimeoutMs), so a
// process that has just started answers from Redis; once connected, an outage is never waited for.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { Valkey } from 'iovalkey';
import { createClient } from 'redis';
import { createLimiter, ERROR_CODES, fixedWindow, RedisStore, SluiceError } from '../../src/index.js';
import { LIBRARY_NAME, SCRIPTS } from '../../src/stores/redis/scripts.js';
import type { StoreRequest } from '../../src/types.js';
import { CLIENT_KINDS, connect } from '../helpers/clients.js';

/** The clients an app makes before they connect (GLIDE's createClient() resolves once connected). */
const FRESH_KINDS = ['ioredis', 'node-redis', 'iovalkey'] as const;

import { freePort, type RedisServer, startRedis } from '../helpers/redis-server.js';
import { oneUnit } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const HOUR = 3_600_000;

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/**
 * A client as an app makes it at start, with the settings sluice expects (no offline queue, so a
 * command sent before the connection is made fails rather than waits) and its connection only
 * started, not awaited.
 */
function freshClient(
  kind: (typeof FRESH_KINDS)[number],
  port: number,
): { client: unknown; close: () => void } {
  if (kind === 'ioredis' || kind === 'iovalkey') {
    const Client = (kind === 'ioredis' ? Redis : Valkey) as unknown as typeof Redis;
    const client = new Client({ port, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    return { client, close: () => client.disconnect() };
  }
  const client = createClient({ socket: { port }, disableOfflineQueue: true });
  client.on('error', () => {});
  client.connect().catch(() => {});
  return { client, close: () => client.destroy() };
}

/** Whether the client says it is connected (ioredis `status`, node-redis `isReady`). */
function isUp(client: unknown): boolean {
  const { status, isReady } = client as { status?: string; isReady?: boolean };
  return status === 'ready' || isReady === true;
}

function request(identifier: string): StoreRequest {
  return oneUnit('ready', identifier);
}

describe('a fresh client', () => {
  for (const kind of FRESH_KINDS) {
    test(`${kind}: a fresh client's first 100 decisions all come from Redis`, async () => {
      // The 100 remainders (999 down to 900) must be counted in one hour's window.
      await clearOfWindowEnd(HOUR, 10_000);
      const { client, close } = freshClient(kind, server.port);
      try {
        const store = new RedisStore({ client });
        // A generous timeoutMs: what is shown is the wait for the connection, not the machine's speed.
        const limiter = createLimiter({
          store,
          policy: fixedWindow({ limit: 1000, windowMs: HOUR }),
          name: `fresh-${kind}`,
          timeoutMs: 10_000,
        });
        const decisions = await Promise.all(Array.from({ length: 100 }, () => limiter.limit('first')));
        assert.deepEqual(
          decisions.filter((decision) => decision.reason !== undefined).map((decision) => decision.reason),
          [],
        );
        assert.deepEqual(
          decisions.map((decision) => decision.remaining).sort((a, b) => b - a),
          Array.from({ length: 100 }, (_, i) => 999 - i),
        );
      } finally {
        close();
      }
    });

    test(`${kind}: untilReady() waits for the first connection only; an outage later is not waited for`, async () => {
      const own = await startRedis();
      const { client, close } = freshClient(kind, own.port);
      try {
        const store = new RedisStore({ client, connectTimeoutMs: 300 });
        const waiting = store.untilReady();
        assert.ok(waiting instanceof Promise, 'a promise before the first connection');
        await waiting;
        assert.equal(store.untilReady(), undefined, 'nothing to wait for once connected');
        await store.decide(request('a'));
        await own.kill();
        // Until the client has seen its connection close.
        for (let i = 0; i < 500 && isUp(client); i++) await new Promise((resolve) => setTimeout(resolve, 10));
        assert.equal(isUp(client), false);
        assert.equal(store.untilReady(), undefined, 'a later outage is the failure policy’s to answer');
        // ready() asks about now: the server is down, so it waits, then says so.
        await assert.rejects(store.ready(), SluiceError);
      } finally {
        close();
        await own.stop();
      }
    });
  }

  test('ioredis with lazyConnect: untilReady() starts the connection a command would have started', async () => {
    const client = new Redis({
      port: server.port,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    });
    client.on('error', () => {});
    try {
      const store = new RedisStore({ client });
      assert.equal(client.status, 'wait');
      await store.untilReady();
      assert.equal(client.status, 'ready');
      assert.equal((await store.decide(request('lazy'))).remaining, 9);
    } finally {
      client.disconnect();
    }
  });

  test('an already connected client: only the scripts to load, once', async () => {
    for (const kind of CLIENT_KINDS) {
      const connected = await connect(kind, server.port);
      try {
        const store = new RedisStore({ client: connected.client });
        const loading = store.untilReady();
        assert.ok(loading instanceof Promise, kind);
        assert.equal(store.untilReady(), loading, `${kind}: one load for every caller`);
        await loading;
        assert.equal(store.untilReady(), undefined, kind);
        await store.ready();
      } finally {
        await connected.close();
      }
    }
  });

  test('nothing listening: ready() and untilReady() reject with ERR_SLUICE_STORE naming host:port after connectTimeoutMs, then at once', async () => {
    const port = await freePort();
    for (const kind of FRESH_KINDS) {
      const { client, close } = freshClient(kind, port);
      try {
        const store = new RedisStore({ client, connectTimeoutMs: 200 });
        const expected = (error: unknown): boolean => {
          assert.ok(error instanceof SluiceError);
          assert.equal(error.code, ERROR_CODES.STORE);
          assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${port}|localhost:${port}`));
          assert.match(error.message, /within 200 ms \(RedisStore\.connectTimeoutMs\)/);
          return true;
        };
        await assert.rejects(store.ready(), expected);
        // The wait failed once: later calls are not made to wait again, the failure policy answers.
        const again = store.untilReady();
        assert.ok(again instanceof Promise);
        let settled = false;
        again.catch(() => {
          settled = true;
        });
        await new Promise((resolve) => setImmediate(resolve));
        assert.equal(settled, true, `${kind}: rejected at once`);
      } finally {
        close();
      }
    }
  });

  test('connectTimeoutMs: a whole number of milliseconds, checked at construction', () => {
    const client = new Redis({ port: server.port, lazyConnect: true });
    try {
      for (const value of [0, -1, 1.5, '1000', Number.NaN]) {
        assert.throws(
          () => new RedisStore({ client, connectTimeoutMs: value as number }),
          (error: unknown) =>
            error instanceof SluiceError &&
            error.code === ERROR_CODES.INVALID_OPTION &&
            /RedisStore\.connectTimeoutMs/.test(error.message),
        );
      }
      assert.equal(new RedisStore({ client }).connectTimeoutMs, 5000);
    } finally {
      client.disconnect();
    }
  });
});

describe('ready() loads the scripts', () => {
  /** SCRIPT LOAD and FUNCTION LOAD calls, and NOSCRIPT replies, so far. */
  const loads = async (admin: Redis): Promise<{ loaded: number; noscript: number }> => {
    const stats = `${await admin.info('commandstats')}\n${await admin.info('errorstats')}`;
    const calls = (name: string): number => Number(new RegExp(`${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    const noscript = Number(/errorstat_NOSCRIPT:count=(\d+)/.exec(stats)?.[1] ?? 0);
    return { loaded: calls('cmdstat_script\\|load') + calls('cmdstat_function\\|load'), noscript };
  };

  /** Error replies of every kind the server has sent so far (NOSCRIPT, a missing function's ERR). */
  const errorReplies = async (admin: Redis): Promise<number> =>
    [...(await admin.info('errorstats')).matchAll(/count=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);

  /** For each client kind in turn: a store of `mode` on a server that holds no script and no library. */
  const onFlushedServer = async (
    mode: 'scripts' | 'functions',
    body: (admin: Redis, store: RedisStore, kind: (typeof CLIENT_KINDS)[number]) => Promise<void>,
  ): Promise<void> => {
    const admin = new Redis({ port: server.port });
    try {
      for (const kind of CLIENT_KINDS) {
        await admin.call('SCRIPT', 'FLUSH');
        await admin.call('FUNCTION', 'FLUSH');
        const connected = await connect(kind, server.port);
        try {
          await body(admin, new RedisStore({ client: connected.client, mode }), kind);
        } finally {
          await connected.close();
        }
      }
    } finally {
      admin.disconnect();
    }
  };

  for (const mode of ['scripts', 'functions'] as const) {
    test(`${mode}: without ready(), a limiter's first decisions wait for the load and meet no missing script`, async () => {
      // Each client kind's five remainders (9 down to 5) must be counted in one hour's window.
      await clearOfWindowEnd(HOUR, 30_000);
      await onFlushedServer(mode, async (admin, store, kind) => {
        const limiter = createLimiter({
          store,
          policy: fixedWindow({ limit: 10, windowMs: HOUR }),
          name: `first-${mode}`,
        });
        const before = { loads: await loads(admin), errors: await errorReplies(admin) };
        const first = await Promise.all(Array.from({ length: 5 }, () => limiter.limit(kind)));
        assert.deepEqual(
          first.map((decision) => [decision.remaining, decision.reason]),
          [9, 8, 7, 6, 5].map((left) => [left, undefined]),
          kind,
        );
        assert.equal(await errorReplies(admin), before.errors, `${kind}: no error reply`);
        assert.ok((await loads(admin)).loaded > before.loads.loaded, `${kind}: loaded before deciding`);
      });
    });

    test(`${mode}: after ready() on a server that has none, every script is there and the first decision loads nothing`, async () => {
      await onFlushedServer(mode, async (admin, store, kind) => {
        const before = await loads(admin);
        await store.ready();
        const ready = await loads(admin);
        assert.ok(ready.loaded > before.loaded, `${kind}: ready() loaded`);
        if (mode === 'scripts') {
          const shas = Object.values(SCRIPTS).map((script) => script.sha);
          const exist = (await admin.call('SCRIPT', 'EXISTS', ...shas)) as number[];
          assert.deepEqual(
            exist,
            shas.map(() => 1),
            kind,
          );
        } else {
          const listed = JSON.stringify(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY_NAME));
          assert.ok(listed.includes(LIBRARY_NAME), `${kind}: ${LIBRARY_NAME} listed`);
        }
        const decided = await store.decide(request(`first-${kind}-${mode}`));
        assert.equal(decided.remaining, 9, kind);
        assert.deepEqual(await loads(admin), ready, `${kind}: the first decision loaded nothing`);
      });
    });
  }
});
