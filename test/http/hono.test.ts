// Hono, driven in-process with app.request: the common behaviour, stacked middlewares, remote address.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { Hono } from 'hono';
import { rateLimit } from '../../src/http/adapters/hono.js';
import { clientIp } from '../../src/http/client-key.js';
import { conformance } from '../helpers/http/conformance.js';
import { buildHono, nodeEnv } from '../helpers/http/harness/hono.js';
import { memoryLimiter, rateLimitItem, SECONDS_LEFT, type TestLimiter } from '../helpers/http/support.js';

function routes(app: Hono): void {
  app.get('/ok', (c) => c.text('ok'));
  app.get('/fail', (c) => c.text('no', 401));
  app.get('/health', (c) => c.text('up'));
}

conformance('hono', buildHono, undefined, { noPeer: true });

describe('hono: specifics', () => {
  const opened: TestLimiter[] = [];
  const limiterOf = (limit: number, name?: string) => {
    const made = memoryLimiter(limit, name);
    opened.push(made);
    return made.limiter;
  };
  afterEach(() => {
    for (const made of opened.splice(0)) made.close();
  });

  it('an outer and an inner middleware each add their item, whatever order they render in', async () => {
    const app = new Hono();
    const globalLimiter = limiterOf(10, 'global');
    app.use(rateLimit({ limiter: globalLimiter }));
    app.use('/search', rateLimit({ limiter: limiterOf(2, 'search') }));
    app.get('/search', (c) => c.text('found'));
    const reply = await app.request('/search', {}, nodeEnv('203.0.113.9'));
    assert.equal(reply.status, 200);
    const headers = Object.fromEntries(reply.headers);
    assert.deepEqual(rateLimitItem(headers, 'global'), { r: 9, t: SECONDS_LEFT });
    assert.deepEqual(rateLimitItem(headers, 'search'), { r: 1, t: SECONDS_LEFT });
    await app.request('/search', {}, nodeEnv('203.0.113.9'));
    const refused = await app.request('/search', {}, nodeEnv('203.0.113.9'));
    assert.equal(refused.status, 429);
    assert.deepEqual(rateLimitItem(Object.fromEntries(refused.headers), 'global'), { r: 8, t: SECONDS_LEFT });
    assert.equal(
      (await globalLimiter.peek('203.0.113.9')).remaining,
      8,
      'the inner refusal gave back the outer grant',
    );
  });

  it('a remoteAddress option and trusted proxies: one hop reads the right-most X-Forwarded-For entry', async () => {
    const limiter = limiterOf(5);
    const app = new Hono();
    app.use(
      rateLimit({
        limiter,
        key: clientIp({ trustProxy: ['10.0.0.0/8'] }),
        remoteAddress: (c) => c.req.header('x-test-peer'),
      }),
    );
    routes(app);
    await app.request('/ok', {
      headers: { 'x-test-peer': '10.1.2.3', 'x-forwarded-for': '1.2.3.4, 198.51.100.7' },
    });
    assert.equal((await limiter.peek('198.51.100.7')).remaining, 4);
    await app.request('/ok', { headers: { 'x-test-peer': '198.51.100.8', 'x-forwarded-for': '1.2.3.4' } });
    assert.equal((await limiter.peek('198.51.100.8')).remaining, 4, 'an untrusted peer is the client');
    assert.equal((await limiter.peek('1.2.3.4')).remaining, 5);
  });

  it("an error in the handler counts as a failure under count: 'failed'", async () => {
    const limiter = limiterOf(3);
    const app = new Hono();
    app.use(rateLimit({ limiter, count: 'failed' }));
    app.get('/boom', () => {
      throw new Error('boom');
    });
    app.onError((_error, c) => c.text('error', 500));
    routes(app);
    assert.equal((await app.request('/boom', {}, nodeEnv('203.0.113.9'))).status, 500);
    assert.equal((await app.request('/ok', {}, nodeEnv('203.0.113.9'))).status, 200);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(
      (await limiter.peek('203.0.113.9')).remaining,
      2,
      'the error was counted, the success refunded',
    );
  });
});
