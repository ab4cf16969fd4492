// The decision in the handler is typed per framework without casts: this file only compiles if it is
// (tsc strict builds the tests), and each `@ts-expect-error` fails the build if the type were `any`.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { describe, it } from 'node:test';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import request from 'supertest';
import { rateLimit as expressRateLimit } from '../../src/http/adapters/express.js';
import { rateLimit as fastifyRateLimit, rateLimitPlugin } from '../../src/http/adapters/fastify.js';
import { rateLimit as fetchRateLimit } from '../../src/http/adapters/fetch.js';
import { rateLimit as honoRateLimit, type RateLimitVariables } from '../../src/http/adapters/hono.js';
import { rateLimit as koaRateLimit } from '../../src/http/adapters/koa.js';
import { rateLimit as nodeRateLimit } from '../../src/http/adapters/node.js';
import { headerKey } from '../../src/http/client-key.js';
import type { RateLimitInfo } from '../../src/http/info.js';
import { closeServer, listen } from '../helpers/http/harness/node.js';
import { memoryLimiter } from '../helpers/http/support.js';

describe('the decision in the handler, typed', () => {
  it('express: req.rateLimit and limiter.info(req)', async () => {
    const { limiter, close } = memoryLimiter(5);
    try {
      const limit = expressRateLimit({ limiter });
      const app = express();
      app.use(limit);
      app.get('/', (req, res) => {
        const info: RateLimitInfo | undefined = req.rateLimit;
        // @ts-expect-error the decision is absent when no limiter decided the request
        const remaining: number = req.rateLimit.remaining;
        res.json({ remaining: info?.remaining, same: limit.info(req) === undefined ? 'none' : remaining });
      });
      const reply = await request(app).get('/');
      assert.deepEqual(reply.body, { remaining: 4, same: 4 });
    } finally {
      close();
    }
  });

  it('fastify: request.rateLimit, with the hook and with the plugin', async () => {
    const { limiter, close } = memoryLimiter(5);
    const app = Fastify();
    try {
      await app.register(rateLimitPlugin, { limiter });
      app.get('/', async (req) => {
        const info: RateLimitInfo | undefined = req.rateLimit;
        // @ts-expect-error the decision is absent when no limiter decided the request
        const limitOf: number = req.rateLimit.limit;
        return { remaining: info?.remaining, limit: limitOf };
      });
      assert.deepEqual(JSON.parse((await app.inject({ url: '/' })).body), { remaining: 4, limit: 5 });
      const bare = Fastify();
      bare.get('/', { onRequest: fastifyRateLimit({ limiter }) }, async (req) => ({
        left: req.rateLimit?.remaining,
      }));
      assert.deepEqual(JSON.parse((await bare.inject({ url: '/' })).body), { left: 3 });
      await bare.close();
    } finally {
      await app.close();
      close();
    }
  });

  it("hono: c.get('rateLimit') typed by the middleware, or by RateLimitVariables, or a variable of your choice", async () => {
    const { limiter, close } = memoryLimiter(5);
    try {
      const env = { incoming: { socket: { remoteAddress: '10.0.0.1' } } };
      const chained = new Hono().use(honoRateLimit({ limiter }));
      chained.get('/', (c) => {
        const info: RateLimitInfo | undefined = c.get('rateLimit');
        // @ts-expect-error the decision is absent when no limiter decided the request
        const remaining: number = c.get('rateLimit').remaining;
        return c.json({ remaining: info?.remaining ?? remaining });
      });
      assert.deepEqual(await (await chained.request('/', {}, env)).json(), { remaining: 4 });

      const declared = new Hono<{ Variables: RateLimitVariables }>();
      declared.get('/', honoRateLimit({ limiter }), (c) =>
        c.json({ remaining: c.get('rateLimit')?.remaining }),
      );
      assert.deepEqual(await (await declared.request('/', {}, env)).json(), { remaining: 3 });

      const named = new Hono();
      named.get('/', honoRateLimit({ limiter, variable: 'quota' }), (c) =>
        c.json({ remaining: c.get('quota')?.remaining }),
      );
      assert.deepEqual(await (await named.request('/', {}, env)).json(), { remaining: 2 });
    } finally {
      close();
    }
  });

  it('koa: ctx.state.rateLimit and limit.info(ctx)', async () => {
    const { limiter, close } = memoryLimiter(5);
    try {
      const limit = koaRateLimit({ limiter });
      const app = new Koa();
      app.use(limit);
      app.use((ctx) => {
        const info: RateLimitInfo | undefined = ctx.state.rateLimit;
        // @ts-expect-error the decision is absent when no limiter decided the request
        const remaining: number = ctx.state.rateLimit.remaining;
        ctx.body = { remaining: info?.remaining, same: limit.info(ctx) === info ? remaining : 'differs' };
      });
      const reply = await request(app.callback()).get('/');
      assert.deepEqual(reply.body, { remaining: 4, same: 4 });
    } finally {
      close();
    }
  });

  it('node:http: the listener’s third argument, and limit.info(req)', async () => {
    const { limiter, close } = memoryLimiter(5);
    const limit = nodeRateLimit({ limiter });
    const server = createServer(
      limit.wrap((req, res, info) => {
        const same: RateLimitInfo | undefined = limit.info(req);
        // @ts-expect-error the decision is absent when no limiter decided the request
        const remaining: number = info.remaining;
        res.end(JSON.stringify({ remaining: info?.remaining, same: same === info ? remaining : 'differs' }));
      }),
    );
    try {
      const reply = await request(await listen(server)).get('/');
      assert.deepEqual(JSON.parse(reply.text), { remaining: 4, same: 4 });
    } finally {
      await closeServer(server);
      close();
    }
  });

  it('fetch: limit.info(request)', async () => {
    const { limiter, close } = memoryLimiter(5);
    try {
      const limit = fetchRateLimit({ limiter, key: headerKey('x-api-key') });
      const handler = limit.wrap((req) => {
        const info: RateLimitInfo | undefined = limit.info(req);
        // @ts-expect-error the decision is absent when no limiter decided the request
        const remaining: number = limit.info(req).remaining;
        return Response.json({ remaining: info?.remaining ?? remaining });
      });
      const response = await handler(new Request('http://example.test/', { headers: { 'x-api-key': 'k' } }));
      assert.deepEqual(await response.json(), { remaining: 4 });
    } finally {
      close();
    }
  });
});
