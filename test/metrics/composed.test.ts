// One `metrics` option counts what is made of limiters: every member of an all(), and the login guard's two logs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Hono } from 'hono';
import { Registry } from 'prom-client';
import { rateLimit } from '../../src/http/adapters/hono.js';
import { all, createLimiter, fixedWindow, loginGuard, MemoryStore } from '../../src/index.js';
import { prometheusMetrics } from '../../src/metrics/index.js';
import { outcomes, scrape } from '../helpers/metrics/scrape.js';
import { clearOfWindowEnd } from '../helpers/window.js';

test('all(limiters, { metrics }) counts each member, by its name, from then on', async () => {
  // The limiters count to their limit in a minute's window: it must not end meanwhile.
  await clearOfWindowEnd(60_000, 2_000);
  const registry = new Registry();
  const metrics = prometheusMetrics({ registry });
  const store = new MemoryStore();
  const user = createLimiter({ store, policy: fixedWindow({ limit: 2, windowMs: 60_000 }), name: 'user' });
  const tenant = createLimiter({
    store,
    policy: fixedWindow({ limit: 10, windowMs: 60_000 }),
    name: 'tenant',
  });
  const both = all([user, tenant], { metrics });
  for (let i = 0; i < 3; i++) await both.limit('k');
  await tenant.limit('k');
  const scraped = await scrape(registry);
  // The third check is refused by `user`; the atomic script tells both what each would say.
  assert.deepEqual(outcomes(scraped, 'user'), [2, 1, 0]);
  assert.deepEqual(outcomes(scraped, 'tenant'), [4, 0, 0], 'the direct call on tenant is counted too');
  // A second all() with the same recorder does not count twice.
  all([user, tenant], { metrics });
  await user.peek('k');
  assert.deepEqual(outcomes(await scrape(registry), 'user'), [2, 1, 0]);
  assert.throws(() => all([user], { metrics: {} as never }), /`all.metrics`/);
  store.close();
});

test('loginGuard({ metrics }) counts failures per username and per IP under <name>:user and <name>:ip', async () => {
  const registry = new Registry();
  const metrics = prometheusMetrics({ registry });
  const store = new MemoryStore();
  const guard = loginGuard({ store, perUsername: { limit: 2, windowMs: 60_000 }, metrics });
  for (let i = 0; i < 3; i++) await guard.failed('alice', '203.0.113.9');
  const scraped = await scrape(registry);
  assert.deepEqual(outcomes(scraped, 'login:user'), [2, 1, 0]);
  assert.deepEqual(outcomes(scraped, 'login:ip'), [3, 0, 0]);
  assert.deepEqual(metrics.topDenied('login:user'), [{ identifier: 'alice', count: 1, error: 0 }]);
  store.close();
});

test('rateLimit({ metrics }) counts the decisions of the limiters the middleware uses', async () => {
  await clearOfWindowEnd(60_000, 2_000);
  const registry = new Registry();
  const metrics = prometheusMetrics({ registry });
  const store = new MemoryStore();
  const api = createLimiter({ store, policy: fixedWindow({ limit: 1, windowMs: 60_000 }), name: 'http-api' });
  const app = new Hono().use(rateLimit({ limiter: api, key: () => 'client', metrics }));
  app.get('/', (c) => c.text('ok'));
  assert.deepEqual([(await app.request('/')).status, (await app.request('/')).status], [200, 429]);
  assert.deepEqual(outcomes(await scrape(registry), 'http-api'), [1, 1, 0]);
  assert.throws(() => rateLimit({ limiter: api, metrics: 'yes' as never }), /`metrics`/);
  store.close();
});
