// Koa: the common behaviour, stacked middlewares, errors, and a real server on Redis answering 500 requests at once.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, afterEach, before, describe, it } from 'node:test';
import Koa from 'koa';
import request from 'supertest';
import { rateLimit } from '../../src/http/adapters/koa.js';
import { createLimiter, gcra, RedisStore, SluiceError } from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { burst } from '../helpers/http/burst.js';
import { conformance } from '../helpers/http/conformance.js';
import { buildKoa } from '../helpers/http/harness/koa.js';
import { closeServer, listen } from '../helpers/http/harness/node.js';
import {
  assertExactBurst,
  assertProblem,
  header,
  limiterPool,
  rateLimitItem,
  SECONDS_LEFT,
} from '../helpers/http/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

conformance('koa', buildKoa);

describe('koa: specifics', () => {
  const { limiterOf, closeAll } = limiterPool();
  afterEach(closeAll);

  it('an app-wide and an inner middleware each add their item; a refusal by the inner gives back the outer grant', async () => {
    const app = new Koa();
    const everything = limiterOf(10, 'global');
    app.use(rateLimit({ limiter: everything }));
    const search = rateLimit({ limiter: limiterOf(2, 'search') });
    app.use(async (ctx, next) => (ctx.path === '/search' ? search(ctx, next) : next()));
    app.use((ctx) => {
      ctx.body = { remaining: ctx.state.rateLimit?.remaining, key: ctx.state.rateLimit?.key };
    });
    const agent = request(app.callback());
    const reply = await agent.get('/search');
    assert.equal(reply.status, 200);
    assert.deepEqual(rateLimitItem(reply.headers, 'global'), { r: 9, t: SECONDS_LEFT });
    assert.deepEqual(rateLimitItem(reply.headers, 'search'), { r: 1, t: SECONDS_LEFT });
    assert.deepEqual(
      reply.body,
      { remaining: 1, key: '127.0.0.1' },
      'the tightest of both, typed on ctx.state',
    );
    await agent.get('/search');
    const refused = await agent.get('/search');
    assert.equal(refused.status, 429);
    assertProblem(header(refused.headers, 'content-type'), refused.text, ['search']);
    assert.equal(
      (await everything.peek('127.0.0.1')).remaining,
      8,
      "the inner refusal gave back the outer's grant",
    );
    assert.equal(rateLimitItem((await agent.get('/other')).headers, 'global').r, 7);
  });

  it('a throwing key function reaches the middlewares before it (Koa’s error path); nothing is counted', async () => {
    const limiter = limiterOf(1);
    const app = new Koa();
    app.use(async (ctx, next) => {
      try {
        await next();
      } catch (error) {
        ctx.status = 500;
        ctx.body = (error as Error).message;
      }
    });
    app.use(
      rateLimit({
        limiter,
        key: () => {
          throw new Error('no key today');
        },
      }),
    );
    app.use((ctx) => {
      ctx.body = 'ok';
    });
    const reply = await request(app.callback()).get('/');
    assert.equal(reply.status, 500);
    assert.equal(reply.text, 'no key today');
    assert.equal((await limiter.peek('127.0.0.1')).remaining, 1);
  });

  it('header styles: draft-6 and legacy fields alongside the IETF ones', async () => {
    const app = new Koa();
    app.use(rateLimit({ limiter: limiterOf(3), headers: ['ietf', 'draft-6', 'legacy'] }));
    app.use((ctx) => {
      ctx.body = 'ok';
    });
    const reply = await request(app.callback()).get('/');
    assert.deepEqual(rateLimitItem(reply.headers, 'api'), { r: 2, t: SECONDS_LEFT });
    assert.equal(header(reply.headers, 'ratelimit-limit'), '3');
    assert.equal(header(reply.headers, 'x-ratelimit-remaining'), '2');
  });

  it('bad options throw when the middleware is made, naming the option', () => {
    assert.throws(
      () => rateLimit({ limiter: limiterOf(1), onDenied: 'no' as never }),
      (error: unknown) => error instanceof SluiceError && /`onDenied`/.test(error.message),
    );
    assert.throws(
      () => rateLimit({ limiter: limiterOf(1), stateProperty: 'x' } as never),
      (error: unknown) => error instanceof SluiceError && /stateProperty/.test(error.message),
    );
  });
});

describe('koa: a real server on Redis', () => {
  let redis: RedisServer;
  let connected: Connected;
  let server: Server | undefined;
  before(async () => {
    redis = await startRedis();
    connected = await connect('ioredis', redis.port);
  });
  afterEach(async () => {
    if (server !== undefined) await closeServer(server);
    server = undefined;
  });
  after(async () => {
    await connected.close();
    await redis.stop();
  });

  it('500 requests at once at a limit of 100: exactly 100 allowed, each with its own remaining count', async () => {
    const store = new RedisStore({ client: connected.client, prefix: 'koa' });
    // GCRA over an hour: a burst of 100, and no refill during the test (no window edge to straddle).
    // A busy machine must not turn a slow reply into a timeout decision.
    const limiter = createLimiter({
      store,
      policy: gcra({ limit: 100, periodMs: 3_600_000 }),
      name: 'api',
      timeoutMs: 60_000,
    });
    const app = new Koa();
    app.use(rateLimit({ limiter }));
    app.use((ctx) => {
      ctx.body = String(ctx.state.rateLimit?.remaining);
    });
    server = createServer(app.callback());
    const url = await listen(server);
    const replies = await burst(`${url}/`, 500);
    assertExactBurst(replies, 'api', 100);
    assert.equal((await limiter.peek('127.0.0.1')).remaining, 0);
  });
});
