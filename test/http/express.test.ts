// Express, driven in-process with supertest: the common behaviour, stacked middlewares, errors, client keys.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import express, { type Request } from 'express';
import request from 'supertest';
import { rateLimit } from '../../src/http/adapters/express.js';
import { clientIp } from '../../src/http/client-key.js';
import { conformance } from '../helpers/http/conformance.js';
import { buildExpress } from '../helpers/http/harness/express.js';
import {
  header,
  memoryLimiter,
  rateLimitItem,
  SECONDS_LEFT,
  type TestLimiter,
} from '../helpers/http/support.js';

function routes(app: express.Express): void {
  app.get('/ok', (_req, res) => {
    res.send('ok');
  });
  app.get('/fail', (_req, res) => {
    res.status(401).send('no');
  });
  app.get('/health', (_req, res) => {
    res.send('up');
  });
}

conformance('express', buildExpress);

describe('express: specifics', () => {
  const opened: TestLimiter[] = [];
  const limiterOf = (limit: number, name?: string) => {
    const made = memoryLimiter(limit, name);
    opened.push(made);
    return made.limiter;
  };
  afterEach(() => {
    for (const made of opened.splice(0)) made.close();
  });

  it('an app-wide and a route middleware each add their item to one RateLimit field', async () => {
    const app = express();
    const globalLimiter = limiterOf(10, 'global');
    app.use(rateLimit({ limiter: globalLimiter }));
    app.get('/search', rateLimit({ limiter: limiterOf(2, 'search') }), (_req, res) => {
      res.send('found');
    });
    const reply = await request(app).get('/search');
    assert.equal(reply.status, 200);
    assert.deepEqual(rateLimitItem(reply.headers, 'global'), { r: 9, t: SECONDS_LEFT });
    assert.deepEqual(rateLimitItem(reply.headers, 'search'), { r: 1, t: SECONDS_LEFT });
    await request(app).get('/search');
    const refused = await request(app).get('/search');
    assert.equal(refused.status, 429);
    assert.deepEqual(rateLimitItem(refused.headers, 'global'), { r: 8, t: SECONDS_LEFT });
    assert.equal(
      (await globalLimiter.peek('127.0.0.1')).remaining,
      8,
      "the route's refusal gave back the app-wide grant",
    );
  });

  it('per-route policies: the first matching route rule decides, others use the default limiter', async () => {
    const login = limiterOf(1, 'login');
    const fallback = limiterOf(5, 'default');
    const app = express();
    app.use(rateLimit({ limiter: fallback, routes: [{ path: '/login', method: 'POST', limiter: login }] }));
    app.post('/login', (_req, res) => {
      res.send('welcome');
    });
    app.get('/login', (_req, res) => {
      res.send('form');
    });
    const agent = request(app);
    assert.equal((await agent.post('/login')).status, 200);
    const refused = await agent.post('/login');
    assert.equal(refused.status, 429);
    assert.deepEqual(JSON.parse(refused.text)['violated-policies'], ['login']);
    const form = await agent.get('/login');
    assert.equal(form.status, 200, 'GET /login does not match the POST rule');
    assert.deepEqual(rateLimitItem(form.headers, 'default'), { r: 4, t: SECONDS_LEFT });
  });

  it('a mounted router matches route rules on the full path', async () => {
    const app = express();
    const router = express.Router();
    router.use(rateLimit({ routes: [{ path: '/v1/*', limiter: limiterOf(1, 'v1') }] }));
    router.get('/v1/items', (_req, res) => {
      res.send('items');
    });
    app.use('/api', rateLimit({ routes: [{ path: '/api/v1/*', limiter: limiterOf(1, 'mounted') }] }), router);
    const reply = await request(app).get('/api/v1/items');
    assert.equal(reply.status, 200);
    assert.equal(rateLimitItem(reply.headers, 'mounted').r, 0);
    assert.equal(
      header(reply.headers, 'ratelimit')?.includes('"v1"'),
      false,
      "'/v1/*' does not match /api/v1/items",
    );
  });

  it('a throwing key function reaches the error handler; nothing is counted', async () => {
    const limiter = limiterOf(1);
    const app = express();
    app.use(
      rateLimit({
        limiter,
        key: () => {
          throw new Error('no key today');
        },
      }),
    );
    routes(app);
    app.use((error: Error, _req: Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).send(error.message);
    });
    const reply = await request(app).get('/ok');
    assert.equal(reply.status, 500);
    assert.equal(reply.text, 'no key today');
    assert.equal((await limiter.peek('127.0.0.1')).remaining, 1);
  });

  it('header styles: draft-6 and legacy fields alongside the IETF ones, all whole numbers', async () => {
    const app = express();
    app.use(rateLimit({ limiter: limiterOf(3), headers: ['ietf', 'draft-6', 'legacy'] }));
    routes(app);
    const reply = await request(app).get('/ok');
    assert.deepEqual(rateLimitItem(reply.headers, 'api'), { r: 2, t: SECONDS_LEFT });
    assert.equal(header(reply.headers, 'ratelimit-limit'), '3');
    assert.equal(header(reply.headers, 'ratelimit-remaining'), '2');
    assert.equal(header(reply.headers, 'ratelimit-reset'), String(SECONDS_LEFT));
    assert.equal(header(reply.headers, 'x-ratelimit-limit'), '3');
    assert.equal(header(reply.headers, 'x-ratelimit-remaining'), '2');
    assert.match(header(reply.headers, 'x-ratelimit-reset') ?? '', /^\d{10}$/);
  });

  it('a spoofed X-Forwarded-For from a direct client is ignored; with one trusted hop it is read', async () => {
    const direct = limiterOf(5, 'direct');
    const proxied = limiterOf(5, 'proxied');
    const app = express();
    app.get('/direct', rateLimit({ limiter: direct }), (_req, res) => {
      res.send('ok');
    });
    app.get('/proxied', rateLimit({ limiter: proxied, key: clientIp({ trustProxy: 1 }) }), (_req, res) => {
      res.send('ok');
    });
    const agent = request(app);
    await agent.get('/direct').set('X-Forwarded-For', '1.2.3.4');
    assert.equal((await direct.peek('127.0.0.1')).remaining, 4, 'keyed by the socket address');
    assert.equal((await direct.peek('1.2.3.4')).remaining, 5, 'the spoofed address is untouched');
    await agent.get('/proxied').set('X-Forwarded-For', '1.2.3.4, 198.51.100.7');
    assert.equal((await proxied.peek('198.51.100.7')).remaining, 4, 'the right-most untrusted address');
    assert.equal((await proxied.peek('127.0.0.1')).remaining, 5);
  });
});
