// The Fastify plugin: per-route settings, routes turned off, global or opt-in, encapsulation, the hook of choice.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { rateLimitPlugin } from '../../src/http/adapters/fastify.js';
import { SluiceError } from '../../src/index.js';
import { header, limiterPool, policyItem, rateLimitItem, SECONDS_LEFT } from '../helpers/http/support.js';

/** The `user` of a parsed JSON body, read without a cast. */
function bodyUser(request: FastifyRequest): string | undefined {
  const body = request.body;
  if (typeof body !== 'object' || body === null || !('user' in body)) return undefined;
  return typeof body.user === 'string' ? body.user : undefined;
}

describe('fastify plugin', () => {
  const { limiterOf, closeAll } = limiterPool();
  const apps: FastifyInstance[] = [];
  const appOf = () => {
    const app = Fastify();
    apps.push(app);
    return app;
  };
  afterEach(async () => {
    closeAll();
    for (const app of apps.splice(0)) await app.close();
  });

  const statuses = async (app: FastifyInstance, url: string, times: number) => {
    const seen: number[] = [];
    for (let i = 0; i < times; i++) seen.push((await app.inject({ url })).statusCode);
    return seen;
  };

  it('per route: two routes with their own limits, one route off, the rest on the plugin’s limiter', async () => {
    const app = appOf();
    await app.register(rateLimitPlugin, { limiter: limiterOf(4, 'default') });
    app.get('/search', { config: { rateLimit: { limiter: limiterOf(2, 'search') } } }, async () => 'found');
    app.get('/export', { config: { rateLimit: { limiter: limiterOf(1, 'export') } } }, async () => 'csv');
    app.get('/health', { config: { rateLimit: false } }, async () => 'up');
    app.get('/other', async (request) => ({ remaining: request.rateLimit?.remaining }));
    assert.deepEqual(await statuses(app, '/search', 3), [200, 200, 429]);
    assert.deepEqual(await statuses(app, '/export', 2), [200, 429]);
    const search = await app.inject({ url: '/search' });
    assert.deepEqual(policyItem(search.headers, 'search'), { q: 2, w: 60 });
    assert.equal(header(search.headers, 'ratelimit')?.includes('"default"'), false, 'one limiter per route');
    assert.deepEqual(await statuses(app, '/health', 6), [200, 200, 200, 200, 200, 200]);
    assert.equal((await app.inject({ url: '/health' })).headers.ratelimit, undefined);
    const other = await app.inject({ url: '/other' });
    assert.deepEqual(rateLimitItem(other.headers, 'default'), { r: 3, t: SECONDS_LEFT });
    assert.deepEqual(JSON.parse(other.body), { remaining: 3 }, 'request.rateLimit, typed, in the handler');
  });

  it('a route’s settings merge over the plugin’s: a per-route limit keeps the plugin’s limiter and key', async () => {
    const app = appOf();
    const limiter = limiterOf(10, 'api');
    await app.register(rateLimitPlugin, { limiter });
    app.get('/small', { config: { rateLimit: { limit: 2 } } }, async () => 'ok');
    const first = await app.inject({ url: '/small' });
    assert.deepEqual(policyItem(first.headers, 'api'), { q: 2, w: 60 });
    assert.deepEqual(await statuses(app, '/small', 2), [200, 429]);
  });

  it('global: false limits only the routes that ask', async () => {
    const app = appOf();
    await app.register(rateLimitPlugin, { global: false, limiter: limiterOf(1, 'default') });
    app.get('/free', async () => 'free');
    app.get('/limited', { config: { rateLimit: {} } }, async () => 'limited');
    assert.deepEqual(await statuses(app, '/free', 3), [200, 200, 200]);
    assert.deepEqual(await statuses(app, '/limited', 2), [200, 429]);
  });

  it('encapsulation: the scope that registers it and its children are limited, not its parent or siblings', async () => {
    const app = appOf();
    app.get('/outside', async () => 'outside');
    await app.register(async (scope) => {
      await scope.register(rateLimitPlugin, { limiter: limiterOf(5, 'scoped') });
      scope.get('/inside', async () => 'inside');
      await scope.register(async (child) => {
        child.get('/deeper', async () => 'deeper');
      });
    });
    await app.register(async (sibling) => {
      sibling.get('/sibling', async () => 'sibling');
    });
    for (const url of ['/inside', '/deeper']) {
      assert.equal(rateLimitItem((await app.inject({ url })).headers, 'scoped').r >= 0, true, url);
    }
    for (const url of ['/outside', '/sibling']) {
      assert.equal((await app.inject({ url })).headers.ratelimit, undefined, url);
    }
  });

  it('preHandler: a key from the parsed JSON body', async () => {
    const app = appOf();
    const limiter = limiterOf(2, 'login');
    await app.register(rateLimitPlugin, { limiter, hook: 'preHandler', key: bodyUser, missingKey: 'deny' });
    app.post('/login', async (request) => `hello ${bodyUser(request)}`);
    const login = (user: string) => app.inject({ method: 'POST', url: '/login', payload: { user } });
    assert.equal((await login('alice')).statusCode, 200);
    assert.equal((await login('alice')).statusCode, 200);
    assert.equal((await login('alice')).statusCode, 429);
    assert.equal((await login('bob')).statusCode, 200, 'another user of the same address has its own quota');
    assert.equal((await limiter.peek('bob')).remaining, 1);
    assert.equal((await limiter.peek('127.0.0.1')).remaining, 2, 'the address was never the key');
  });

  it('a route may choose its own hook: preHandler for one route, onRequest for the rest', async () => {
    const app = appOf();
    await app.register(rateLimitPlugin, { limiter: limiterOf(3, 'default') });
    const byUser = limiterOf(1, 'by-user');
    app.post(
      '/vote',
      { config: { rateLimit: { limiter: byUser, hook: 'preHandler', key: bodyUser } } },
      async () => 'counted',
    );
    const vote = (user: string) => app.inject({ method: 'POST', url: '/vote', payload: { user } });
    assert.equal((await vote('carol')).statusCode, 200);
    assert.equal((await vote('carol')).statusCode, 429);
    assert.equal((await vote('dave')).statusCode, 200);
  });

  it('bad settings fail the registration, naming the option', async () => {
    const noLimiter = appOf();
    await assert.rejects(
      async () => {
        await noLimiter.register(rateLimitPlugin, {});
        await noLimiter.ready();
      },
      (error: unknown) => error instanceof SluiceError && /`limiter`/.test(error.message),
    );
    const badHook = appOf();
    await assert.rejects(
      async () => {
        await badHook.register(rateLimitPlugin, { global: false });
        badHook.get(
          '/x',
          { config: { rateLimit: { limiter: limiterOf(1), hook: 'onSend' as never } } },
          async () => 'x',
        );
        await badHook.ready();
      },
      (error: unknown) =>
        error instanceof SluiceError && /config\.rateLimit of GET \/x\.hook/.test(error.message),
    );
  });
});
