// The client settings sluice expects: a client that would queue commands behind a dead connection
// gets one process warning (once per client, however many stores share it); a client set up as the
// docs/redis.md says gets none.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { RedisStore } from '../src/index.js';
import { type RedisServer, startRedis } from './helpers/redis-server.js';

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
