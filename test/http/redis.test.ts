// The middlewares against a real redis-server: the common behaviour of every adapter, keys in Redis,
// and penalties shared by two middleware instances that share nothing but the server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import request from 'supertest';
import { rateLimit } from '../../src/http/adapters/express.js';
import { createLimiter, fixedWindow, RedisStore } from '../../src/index.js';
import { CLIENT_KINDS, type ClientKind, type Connected, connect } from '../helpers/clients.js';
import { type Build, type Capabilities, conformance, type MakeLimiter } from '../helpers/http/conformance.js';
import { buildExpress } from '../helpers/http/harness/express.js';
import { buildFastify } from '../helpers/http/harness/fastify.js';
import { buildFetch } from '../helpers/http/harness/fetch.js';
import { buildHono } from '../helpers/http/harness/hono.js';
import { buildKoa } from '../helpers/http/harness/koa.js';
import { buildNode } from '../helpers/http/harness/node.js';
import { NOW, rateLimitItem, SECONDS_LEFT, testClock, WINDOW_MS } from '../helpers/http/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene } from '../helpers/suites.js';

// The conformance suites register their tests at load time; the server and clients are ready before any runs.
let server: RedisServer;
const clients = new Map<string, Connected>();
let prefixes = 0;

before(async () => {
  server = await startRedis();
  for (const kind of CLIENT_KINDS) clients.set(kind, await connect(kind, server.port));
});
after(async () => {
  for (const client of clients.values()) await client.close();
  await server.stop();
});

function clientOf(kind: ClientKind): Connected {
  const client = clients.get(kind);
  assert.ok(client !== undefined, `${kind} is connected`);
  return client;
}

/** A limiter on its own prefix; `prefix` shares one with another limiter, as two processes would. */
function redisLimiter(
  kind: ClientKind,
  limit: number,
  name = 'api',
  clock = () => NOW,
  prefix?: string,
  overrides = false,
) {
  const store = new RedisStore({ client: clientOf(kind).client, prefix: prefix ?? `http${++prefixes}` });
  const policy = fixedWindow({ limit, windowMs: WINDOW_MS });
  // A busy machine must not turn a slow reply into a timeout decision: the tests assert exact headers.
  const limiter = createLimiter({ store, policy, name, clock, timeoutMs: 60_000, overrides });
  return { limiter, store, close: () => {} };
}

const redisLimiters =
  (kind: ClientKind): MakeLimiter =>
  (limit, name, clock, overrides) =>
    redisLimiter(kind, limit, name, clock, undefined, overrides);

const ADAPTERS: ReadonlyArray<[string, Build, Capabilities]> = [
  ['express', buildExpress, {}],
  ['fastify', buildFastify, {}],
  ['hono', buildHono, { noPeer: true }],
  ['koa', buildKoa, {}],
  ['node:http', buildNode, {}],
  ['fetch', buildFetch, { noPeer: true }],
];

// Every adapter on one client; the HTTP layer does not know the client, so the other runs Express only.
for (const [adapter, build, capabilities] of ADAPTERS) {
  conformance(`${adapter} on redis (ioredis)`, build, redisLimiters('ioredis'), capabilities);
}
conformance('express on redis (node-redis)', buildExpress, redisLimiters('node-redis'));

for (const kind of CLIENT_KINDS) {
  describe(`express on redis (${kind}): state`, () => {
    it('the key in Redis is the client address; a refused request leaves the count unchanged', async () => {
      const client = clientOf(kind);
      const { limiter, store } = redisLimiter(kind, 2);
      const app = express();
      app.use(rateLimit({ limiter, warnings: false }));
      app.get('/ok', (_req, res) => void res.send('ok'));
      const agent = request(app);
      for (let i = 0; i < 2; i++)
        assert.equal((await agent.get('/ok').set('X-Forwarded-For', '1.2.3.4')).status, 200);
      const refused = await agent.get('/ok');
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['retry-after'], String(SECONDS_LEFT));
      assert.deepEqual(rateLimitItem(refused.headers, 'api'), { r: 0, t: SECONDS_LEFT });
      const key = store.keyFor('api', '127.0.0.1');
      assert.equal(await client.command('EXISTS', key), 1);
      assert.equal(
        await client.command('EXISTS', store.keyFor('api', '1.2.3.4')),
        0,
        'the spoofed address has no key',
      );
      const ttl = Number(await client.command('PTTL', key));
      assert.ok(ttl > 0, `the key expires (PTTL ${ttl})`);
    });
  });
}

describe('penalties on redis: two middleware instances that share only the server', () => {
  /** An app as a second process would build it: its own client, store, limiter and middleware. */
  async function instance(prefix: string, clock: () => number) {
    const connected = await connect('ioredis', server.port);
    const store = new RedisStore({ client: connected.client, prefix });
    const policy = fixedWindow({ limit: 1, windowMs: WINDOW_MS });
    const limiter = createLimiter({ store, policy, name: 'api', clock, timeoutMs: 60_000 });
    const middleware = rateLimit({
      limiter,
      skip: (req) => req.path === '/reset',
      ban: { after: 0, windowMs: WINDOW_MS, durationMs: 30_000 },
      block: { durationMs: 5_000 },
    });
    const app = express();
    app.use(middleware);
    app.get('/ok', (_req, res) => void res.send('ok'));
    app.get('/reset', async (req, res) => {
      await middleware.resetKey(req);
      res.send('reset');
    });
    return { agent: request(app), connected, store };
  }
  type Instance = Awaited<ReturnType<typeof instance>>;

  /** Two instances on one fresh prefix and one test clock, closed afterwards. */
  async function twoInstances(
    run: (first: Instance, second: Instance, clock: ReturnType<typeof testClock>) => Promise<void>,
  ) {
    const clock = testClock();
    const prefix = `shared${++prefixes}`;
    const first = await instance(prefix, clock.now);
    const second = await instance(prefix, clock.now);
    try {
      await run(first, second, clock);
    } finally {
      await first.connected.close();
      await second.connected.close();
    }
  }

  it('a ban made through one instance is enforced by the other, ends for both, and is kept in Redis with a TTL', () =>
    twoInstances(async (first, second, clock) => {
      assert.equal((await first.agent.get('/ok')).status, 200);
      assert.equal((await second.agent.get('/ok')).status, 403, 'the quota is shared: the refusal bans');
      const elsewhere = await first.agent.get('/ok');
      assert.equal(elsewhere.status, 403, 'the other instance knows the ban');
      assert.equal(elsewhere.headers['retry-after'], '30');
      const banKey = first.store.keyFor('api:ban', '127.0.0.1');
      assert.equal(await first.connected.command('EXISTS', banKey), 1, 'the ban lives in Redis');
      assert.ok(Number(await first.connected.command('PTTL', banKey)) > 0);
      clock.advance(30_000);
      assert.equal((await second.agent.get('/ok')).status, 200, 'the ban ended, a new window began');
      await assertHygiene(first.connected);
    }));

  it('resetKey through one instance lifts the ban for both', () =>
    twoInstances(async (first, second) => {
      await first.agent.get('/ok');
      assert.equal((await first.agent.get('/ok')).status, 403);
      assert.equal((await second.agent.get('/reset')).text, 'reset');
      assert.equal((await first.agent.get('/ok')).status, 200);
    }));
});
