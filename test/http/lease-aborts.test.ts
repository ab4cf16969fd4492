// Clients that go away mid-request, on Redis: each slot comes back when the server sees its socket close, while
// its handler still runs and long before its lease would lapse. The delay from close to release is reported.
import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { rateLimit } from '../../src/http/adapters/node.js';
import { headerKey } from '../../src/http/client-key.js';
import { concurrency, createLimiter, RedisStore } from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { DecisionCount } from '../helpers/http/lease-conformance.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const CLIENTS = 50;

let redis: RedisServer;
let connected: Connected;
before(async () => {
  redis = await startRedis();
  connected = await connect('ioredis', redis.port);
});
after(async () => {
  await connected.close();
  await redis.stop();
});

/** Sends a GET and, 50 ms after its handler started, destroys its socket; resolves with when it did. */
function abandon(url: string, id: number, started: Promise<void>): Promise<number> {
  return new Promise((resolve) => {
    const sent = request(url, { headers: { 'x-client': 'c', 'x-id': String(id) }, agent: false });
    sent.on('error', () => {});
    sent.end();
    started.then(() =>
      setTimeout(() => {
        sent.destroy();
        resolve(performance.now());
      }, 50),
    );
  });
}

function status(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { headers: { 'x-client': 'c' }, agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    sent.on('error', reject);
    sent.end();
  });
}

describe(`${CLIENTS} clients that close their socket 50 ms after their handler started`, () => {
  test('every slot is free once its close is seen, while the handlers still run', async (t) => {
    const releases = new DecisionCount((d, c) => c.operation === 'release' && d.released === true);
    const limiter = createLimiter({
      store: new RedisStore({ client: connected.client }),
      policy: concurrency({ limit: CLIENTS, leaseMs: 600_000 }),
      name: 'aborts',
      timeoutMs: 60_000,
      onStoreError: 'deny',
      onDecision: releases.hook,
    });
    let entered = 0;
    let finished = 0;
    const hold: Array<() => void> = [];
    const enter = new Map<string, () => void>();
    const started = Array.from(
      { length: CLIENTS },
      (_, i) => new Promise<void>((resolve) => enter.set(String(i), resolve)),
    );
    const server = createServer(
      rateLimit({ limiter, key: headerKey('x-client') }).wrap(async (request, response) => {
        // The request sent after the closes only shows that a slot is free: it answers at once.
        if (request.url === '/?again') return void response.end('again');
        entered++;
        enter.get(String(request.headers['x-id']))?.();
        await new Promise<void>((resolve) => hold.push(resolve));
        finished++;
        response.end('ok');
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    try {
      const closedAt = await Promise.all(
        Array.from({ length: CLIENTS }, (_, i) => abandon(url, i, started[i] as Promise<void>)),
      );
      await releases.reach(CLIENTS);
      assert.equal(finished, 0, 'no handler had answered: the closes freed the slots');
      assert.equal(entered, CLIENTS);
      // The next acquisitions find every slot free.
      assert.equal((await limiter.peek('c')).remaining, CLIENTS);
      // Closes and releases in order: the n-th release follows the n-th close.
      const closes = [...closedAt].sort((a, b) => a - b);
      const delays = releases.at.map((at, i) => at - (closes[i] as number)).sort((a, b) => a - b);
      assert.ok((delays[0] as number) >= 0, 'no slot came back before a close');
      t.diagnostic(
        `close to release: median ${delays[CLIENTS >> 1]?.toFixed(1)} ms, slowest ${delays.at(-1)?.toFixed(1)} ms`,
      );
      assert.equal(await status(`${url}?again`), 200);
    } finally {
      for (const resolve of hold) resolve();
      server.closeAllConnections();
      server.close();
    }
  });
});
