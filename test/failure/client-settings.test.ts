// The client settings sluice expects: a client that would queue commands behind a dead connection
// gets one process warning (once per client, however many stores share it); a client set up as the
// docs/redis.md says gets none.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { GlideClient, Logger } from '@valkey/valkey-glide';
import { Cluster, Redis } from 'ioredis';
import { Valkey } from 'iovalkey';
import { createClient } from 'redis';
import { createLimiter, fixedWindow, RedisStore } from '../../src/index.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

async function warningsWhile(body: () => void): Promise<Array<Error & { code?: string }>> {
  const seen: Array<Error & { code?: string }> = [];
  const saved = process.listeners('warning');
  process.removeAllListeners('warning');
  const listener = (warning: Error): void => {
    seen.push(warning);
  };
  process.on('warning', listener);
  try {
    body();
    // Warnings are emitted on the next tick.
    await tick();
  } finally {
    process.off('warning', listener);
    for (const l of saved) process.on('warning', l);
  }
  return seen.filter((w) => w.code === 'SLUICE_CLIENT_SETTINGS');
}

describe('client settings', () => {
  test('ioredis with its defaults: one warning naming the settings, however many stores', async () => {
    const client = new Redis({ port: server.port, lazyConnect: true });
    try {
      const warnings = await warningsWhile(() => {
        new RedisStore({ client });
        new RedisStore({ client, prefix: 'other' });
      });
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]?.message ?? '', /enableOfflineQueue is not false/);
      assert.match(warnings[0]?.message ?? '', /maxRetriesPerRequest is 20, not 0/);
      assert.match(warnings[0]?.message ?? '', /\{ enableOfflineQueue: false, maxRetriesPerRequest: 0 \}/);
    } finally {
      client.disconnect();
    }
  });

  test('ioredis set up as docs/redis.md says: no warning', async () => {
    const client = new Redis({
      port: server.port,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    });
    try {
      assert.deepEqual(await warningsWhile(() => new RedisStore({ client })), []);
    } finally {
      client.disconnect();
    }
  });

  test('ioredis that never reconnects: warned', async () => {
    const client = new Redis({
      port: server.port,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: null,
    });
    try {
      const warnings = await warningsWhile(() => new RedisStore({ client }));
      assert.equal(warnings.length, 1);
      assert.match(
        warnings[0]?.message ?? '',
        /retryStrategy is not a function: the client never reconnects/,
      );
    } finally {
      client.disconnect();
    }
  });

  test('node-redis with its defaults: one warning; set up as docs/redis.md says: none', async () => {
    const defaults = createClient({ socket: { port: server.port } });
    const good = createClient({ socket: { port: server.port }, disableOfflineQueue: true });
    const never = createClient({
      socket: { port: server.port, reconnectStrategy: false },
      disableOfflineQueue: true,
    });
    const warnings = await warningsWhile(() => {
      new RedisStore({ client: defaults });
      new RedisStore({ client: defaults });
      new RedisStore({ client: good });
      new RedisStore({ client: never });
    });
    assert.equal(warnings.length, 2);
    assert.match(warnings[0]?.message ?? '', /node-redis client.*disableOfflineQueue is not true/);
    assert.match(warnings[1]?.message ?? '', /socket.reconnectStrategy is false/);
  });
});

describe('cluster and other client settings', () => {
  test('ioredis Cluster with its defaults: the warning names retryDelayOnFailover (a call cut off by a dying primary is sent again)', async () => {
    const client = new Cluster([{ host: '127.0.0.1', port: server.port }], { lazyConnect: true });
    try {
      const warnings = await warningsWhile(() => new RedisStore({ client }));
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]?.message ?? '', /enableOfflineQueue is not false/);
      assert.match(
        warnings[0]?.message ?? '',
        /retryDelayOnFailover is 100, not 0: a call cut off by a dying primary is sent again, and may be counted twice/,
      );
    } finally {
      client.disconnect();
    }
  });

  test('ioredis Cluster that fails fast: no warning; one whose nodes reconnect and resend: warned', async () => {
    const good = new Cluster([{ host: '127.0.0.1', port: server.port }], {
      lazyConnect: true,
      enableOfflineQueue: false,
      retryDelayOnFailover: 0,
    });
    const resending = new Cluster([{ host: '127.0.0.1', port: server.port }], {
      lazyConnect: true,
      enableOfflineQueue: false,
      retryDelayOnFailover: 0,
      clusterNodeRetryStrategy: () => 100,
    });
    try {
      assert.deepEqual(await warningsWhile(() => new RedisStore({ client: good })), []);
      const warnings = await warningsWhile(() => new RedisStore({ client: resending }));
      assert.equal(warnings.length, 1);
      assert.match(
        warnings[0]?.message ?? '',
        /clusterNodeRetryStrategy is set and redisOptions\.autoResendUnfulfilledCommands is not false/,
      );
    } finally {
      good.disconnect();
      resending.disconnect();
    }
  });

  test('iovalkey is named as itself in the warning and in store.client', async () => {
    const client = new Valkey({ port: server.port, lazyConnect: true });
    try {
      const warnings = await warningsWhile(() => {
        assert.deepEqual(new RedisStore({ client }).client, { library: 'iovalkey', cluster: false });
      });
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]?.message ?? '', /^sluice: this iovalkey client is not set up/);
    } finally {
      client.disconnect();
    }
  });

  test("Valkey GLIDE: a requestTimeout longer than a limiter's timeoutMs and a long reconnect backoff are named", async () => {
    Logger.setLoggerConfig('off');
    const addresses = [{ host: '127.0.0.1', port: server.port }];
    const defaults = await GlideClient.createClient({ addresses });
    const good = await GlideClient.createClient({ addresses, requestTimeout: 50 });
    const slowBack = await GlideClient.createClient({
      addresses,
      requestTimeout: 50,
      connectionBackoff: { numberOfRetries: 10, factor: 100, exponentBase: 2 },
    });
    const limiterOn = (store: RedisStore, name: string, timeoutMs?: number) =>
      createLimiter({
        store,
        policy: fixedWindow({ limit: 10, windowMs: 1000 }),
        name,
        ...(timeoutMs === undefined ? {} : { timeoutMs }),
      });
    try {
      // requestTimeout depends on the limiters: the store alone says nothing of it.
      let store = new RedisStore({ client: defaults });
      assert.deepEqual(await warningsWhile(() => limiterOn(store, 'patient', 400)), []);
      const first = await warningsWhile(() => {
        limiterOn(store, 'api');
        limiterOn(store, 'again');
      });
      assert.equal(first.length, 1);
      assert.match(
        first[0]?.message ?? '',
        /this valkey-glide client .*requestTimeout is 250 ms \(GLIDE's default\), longer than the timeoutMs of limiter "api" \(50 ms\)/,
      );
      // Held against the limiter's own timeoutMs, not the default.
      store = new RedisStore({ client: good });
      assert.deepEqual(await warningsWhile(() => limiterOn(store, 'api')), []);
      const tight = await warningsWhile(() => limiterOn(store, 'tight', 20));
      assert.equal(tight.length, 1);
      assert.match(
        tight[0]?.message ?? '',
        /requestTimeout is 50 ms, longer than the timeoutMs of limiter "tight" \(20 ms\)/,
      );
      const backoff = await warningsWhile(() => new RedisStore({ client: slowBack }));
      assert.equal(backoff.length, 1);
      assert.match(backoff[0]?.message ?? '', /connectionBackoff lets reconnect attempts grow to 102400 ms/);
    } finally {
      defaults.close();
      good.close();
      slowBack.close();
    }
  });
});
