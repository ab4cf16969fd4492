// The middlewares against a real redis-server: the common behaviour of Express and Fastify with both clients, keys in Redis.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import request from 'supertest';
import { rateLimit } from '../../src/http/express.js';
import { createLimiter, fixedWindow, RedisStore } from '../../src/index.js';
import { CLIENT_KINDS, type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { conformance, type MakeLimiter } from './conformance.js';
import { NOW, rateLimitItem, SECONDS_LEFT, WINDOW_MS } from './support.js';

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

function redisLimiters(kind: string): MakeLimiter {
  return (limit, name = 'api') => {
    const client = clients.get(kind);
    assert.ok(client !== undefined, `${kind} is connected`);
    const store = new RedisStore({ client: client.client, prefix: `http${++prefixes}` });
    const policy = fixedWindow({ limit, windowMs: WINDOW_MS });
    return { limiter: createLimiter({ store, policy, name, clock: () => NOW }), store, close: () => {} };
  };
}

for (const kind of CLIENT_KINDS) {
  const makeLimiter = redisLimiters(kind);
  const expressHarness = async (scenario: Parameters<Parameters<typeof conformance>[1]>[0]) => {
    const app = express();
    app.use(
      rateLimit({
        limiter: scenario.limiter,
        cost: (req) => Number(req.get('x-cost') ?? 1),
        skip: (req) => req.path === '/health',
        ...(scenario.count === undefined ? {} : { count: scenario.count }),
        ...(scenario.customDenial === true
          ? { onDenied: (_req, res) => void res.type('text/plain').send('slow down') }
          : {}),
      }),
    );
    app.get('/ok', (_req, res) => void res.send('ok'));
    app.get('/fail', (_req, res) => void res.status(401).send('no'));
    app.get('/health', (_req, res) => void res.send('up'));
    const agent = request(app);
    return {
      key: '127.0.0.1',
      async send(path: string, headers: Record<string, string> = {}) {
        const response = await agent.get(path).set(headers);
        return { status: response.status, headers: response.headers, body: response.text };
      },
      close: async () => {},
    };
  };
  conformance(`express on redis (${kind})`, expressHarness, makeLimiter);

  describe(`express on redis (${kind}): state`, () => {
    it('the key in Redis is the client address; a refused request leaves the count unchanged', async () => {
      const client = clients.get(kind) as Connected;
      const { limiter, store } = makeLimiter(2);
      const app = express();
      app.use(rateLimit({ limiter }));
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
