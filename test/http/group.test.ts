// The middleware decides several limiters as all() does: an array or an all() on one store is one
// atomic script per request, so a refused request takes nothing from any limiter, under load too.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import express from 'express';
import { rateLimit } from '../../src/http/adapters/express.js';
import { rateLimit as nodeRateLimit } from '../../src/http/adapters/node.js';
import { all, createLimiter, ERROR_CODES, fixedWindow, type Limiter, RedisStore } from '../../src/index.js';
import { redisForSuite } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const USERS = 5;
const PER_USER = 100;
const USER_LIMIT = 100;
const TENANT_LIMIT = 150;

const suite = redisForSuite();

async function listen(app: Parameters<typeof createServer>[1]): Promise<{ url: string; server: Server }> {
  const http = createServer(app);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, server: http };
}

function close(http: Server): Promise<void> {
  http.closeAllConnections();
  return new Promise((resolve) => http.close(() => resolve()));
}

/** Units counted in a fixed window key (the packed integer form: index × 2^21 + count). */
async function counted(key: string): Promise<number> {
  const value = (await suite.redis.command('GET', key)) as string | null;
  if (value === null) return 0;
  const packed = Number(value);
  return Number.isFinite(packed) ? packed % 2 ** 21 : Number(value.split(':')[1]);
}

function limiters(label: string): { user: Limiter; tenant: Limiter; store: RedisStore } {
  const store = new RedisStore({ client: suite.redis.client, prefix: label });
  const make = (name: string, limit: number) =>
    createLimiter({ store, policy: fixedWindow({ limit, windowMs: 3_600_000 }), name, timeoutMs: 60_000 });
  return { user: make('user', USER_LIMIT), tenant: make('tenant', TENANT_LIMIT), store };
}

describe('the middleware with several limiters on one store', () => {
  for (const shape of ['an array', 'all()'] as const) {
    test(`${shape}: 500 concurrent requests of 5 users at 100 each, tenant 150: exactly 150 through, nothing taken by a refusal`, async () => {
      // The 500 requests count to exact limits, read back from the keys, in one hour's window.
      await clearOfWindowEnd(3_600_000, 30_000);
      const label = shape === 'an array' ? 'arr' : 'all';
      const { user, tenant, store } = limiters(label);
      const app = express();
      app.use(
        rateLimit({
          limiter: shape === 'an array' ? [user, tenant] : all([user, tenant]),
          // One identifier per limiter, in order, on one slot thanks to the tenant's tag.
          key: (req) => [String(req.headers['x-user']), 'acme'],
          tag: 'acme',
        }),
      );
      app.get('/', (_req, res) => {
        res.send('ok');
      });
      const { url, server: http } = await listen(app);
      try {
        const before = store.calls;
        const requests: Promise<number>[] = [];
        for (let i = 0; i < USERS * PER_USER; i++) {
          requests.push(fetch(url, { headers: { 'x-user': `u${i % USERS}` } }).then((r) => r.status));
        }
        const statuses = await Promise.all(requests);
        assert.equal(statuses.filter((s) => s === 200).length, TENANT_LIMIT);
        assert.equal(statuses.filter((s) => s === 429).length, USERS * PER_USER - TENANT_LIMIT);
        assert.equal(await counted(store.keyFor('tenant', 'acme', 'acme')), TENANT_LIMIT);
        let users = 0;
        for (let u = 0; u < USERS; u++) users += await counted(store.keyFor('user', `u${u}`, 'acme'));
        assert.equal(users, TENANT_LIMIT, 'the users together hold exactly what passed');
        // One script per request (plus the resends that load it), never one per limiter and refunds.
        const calls = store.calls - before;
        assert.ok(calls < USERS * PER_USER * 1.1, `${calls} script calls for ${USERS * PER_USER} requests`);
      } finally {
        await close(http);
      }
    });
  }

  test('keys of different slots without a tag: the request fails with ERR_SLUICE_CROSS_SLOT, nothing written', async () => {
    const { user, tenant, store } = limiters('slots');
    const errors: unknown[] = [];
    const guard = nodeRateLimit({
      limiter: [user, tenant],
      key: () => ['u1', 'acme'],
      onError: (error, _req, res) => {
        errors.push(error);
        res.statusCode = 500;
        res.end();
      },
    });
    const { url, server: http } = await listen(guard.wrap((_req, res) => res.end('ok')));
    try {
      assert.equal((await fetch(url)).status, 500);
      assert.equal((errors[0] as { code?: string }).code, ERROR_CODES.CROSS_SLOT);
      assert.deepEqual(await suite.redis.command('KEYS', 'slots:*'), []);
      assert.equal(store.calls, 0);
    } finally {
      await close(http);
    }
  });
});
