// Fastify, driven in-process with fastify.inject: the common behaviour, route hooks, errors.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { rateLimit } from '../../src/http/adapters/fastify.js';
import { conformance } from '../helpers/http/conformance.js';
import { buildFastify } from '../helpers/http/harness/fastify.js';
import { memoryLimiter, rateLimitItem, SECONDS_LEFT, type TestLimiter } from '../helpers/http/support.js';

function routes(app: FastifyInstance): void {
  app.get('/ok', async () => 'ok');
  app.get('/fail', async (_request, reply) => reply.code(401).send('no'));
  app.get('/health', async () => 'up');
}

conformance('fastify', buildFastify);

describe('fastify: specifics', () => {
  const opened: TestLimiter[] = [];
  const apps: FastifyInstance[] = [];
  const limiterOf = (limit: number, name?: string) => {
    const made = memoryLimiter(limit, name);
    opened.push(made);
    return made.limiter;
  };
  afterEach(async () => {
    for (const made of opened.splice(0)) made.close();
    for (const app of apps.splice(0)) await app.close();
  });

  it('a global hook and a route hook each add their item', async () => {
    const app = Fastify();
    apps.push(app);
    const globalLimiter = limiterOf(10, 'global');
    app.addHook('onRequest', rateLimit({ limiter: globalLimiter }));
    app.get('/search', { onRequest: rateLimit({ limiter: limiterOf(2, 'search') }) }, async () => 'found');
    const reply = await app.inject({ url: '/search' });
    assert.equal(reply.statusCode, 200);
    assert.deepEqual(rateLimitItem(reply.headers, 'global'), { r: 9, t: SECONDS_LEFT });
    assert.deepEqual(rateLimitItem(reply.headers, 'search'), { r: 1, t: SECONDS_LEFT });
    await app.inject({ url: '/search' });
    const refused = await app.inject({ url: '/search' });
    assert.equal(refused.statusCode, 429);
    assert.deepEqual(rateLimitItem(refused.headers, 'global'), { r: 8, t: SECONDS_LEFT });
    assert.equal(
      (await globalLimiter.peek('127.0.0.1')).remaining,
      8,
      "the route's refusal gave back the global grant",
    );
  });

  it('an error of a cost function reaches the error handler; nothing is counted', async () => {
    const limiter = limiterOf(1);
    const app = Fastify();
    apps.push(app);
    app.addHook(
      'onRequest',
      rateLimit({
        limiter,
        cost: () => {
          throw new Error('no cost today');
        },
      }),
    );
    routes(app);
    const reply = await app.inject({ url: '/ok' });
    assert.equal(reply.statusCode, 500);
    assert.equal(JSON.parse(reply.body).message, 'no cost today');
    assert.equal((await limiter.peek('127.0.0.1')).remaining, 1);
  });

  it('a cost above what the policy can grant is an error, not a 429', async () => {
    const app = Fastify();
    apps.push(app);
    app.addHook('onRequest', rateLimit({ limiter: limiterOf(3), cost: 4 }));
    routes(app);
    const reply = await app.inject({ url: '/ok' });
    assert.equal(reply.statusCode, 500);
    assert.equal(JSON.parse(reply.body).code, 'ERR_SLUICE_COST_EXCEEDS_LIMIT');
  });
});
