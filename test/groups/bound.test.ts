// The largest group one call can decide (all(), a middleware's array, what a `limiter` function returns): 64
// limiters in one call, one script on Redis; 65 is a typed error before anything is written.
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { rateLimit } from '../../src/http/adapters/node.js';
import {
  all,
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  type Limiter,
  SluiceError,
  type Store,
} from '../../src/index.js';
import { MAX_GROUP_SIZE } from '../../src/validate.js';
import { BACKENDS, type Backend, openBackend } from '../helpers/backends.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { unique } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

function limiters(store: Store, count: number): Limiter[] {
  const group = unique('g');
  return Array.from({ length: count }, (_, i) =>
    createLimiter({
      store,
      policy: fixedWindow({ limit: 5, windowMs: 60_000 }),
      name: `${group}-${i}`,
      timeoutMs: 60_000,
    }),
  );
}

const tooLarge = (error: unknown): boolean =>
  error instanceof SluiceError &&
  error.code === ERROR_CODES.INVALID_OPTION &&
  /to hold at most 64 limiters, got 65/.test(error.message);

/** How many keys the store holds: DBSIZE on Redis, the memory store's size. */
async function keys(backend: Backend): Promise<number> {
  if (backend.redis === undefined) return (backend.store as unknown as { size: number }).size;
  return Number(await backend.redis.command('DBSIZE'));
}

test('the bound is 64', () => {
  assert.equal(MAX_GROUP_SIZE, 64);
});

for (const kind of BACKENDS) {
  describe(`the largest group on ${kind}`, () => {
    let backend: Backend;
    before(async () => {
      backend = await openBackend(kind, server);
      if (backend.redis !== undefined) await backend.redis.command('FLUSHALL');
    });
    after(async () => {
      await backend.close();
    });

    test('all() of 64 limiters decides in one call; of 65 it is refused when made', async () => {
      // The keys are counted twice: their minute must not end between the counts (they expire with it).
      await clearOfWindowEnd(60_000, 5_000);
      const decision = await all(limiters(backend.store, 64)).limit('client', { tag: 'client' });
      assert.equal(decision.allowed, true);
      assert.equal(decision.decisions.length, 64);
      const before = await keys(backend);
      assert.throws(() => all(limiters(backend.store, 65)), tooLarge);
      assert.equal(await keys(backend), before);
    });
  });
}

describe('the middleware’s arrays', () => {
  let backend: Backend;
  let http: Server;
  let port = 0;
  let chosen: Limiter[] = [];
  before(async () => {
    backend = await openBackend('memory', server);
    const guard = rateLimit({ limiter: () => chosen, key: () => 'client' });
    http = createServer((request, response) => {
      guard(request, response).then(
        (proceed) => {
          if (proceed) response.end('ok');
        },
        (error: unknown) => {
          response.statusCode = 500;
          response.end(error instanceof SluiceError ? error.code : 'other');
        },
      );
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    port = (http.address() as AddressInfo).port;
  });
  after(async () => {
    await new Promise((resolve) => http.close(resolve));
    await backend.close();
  });

  const get = (): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const request = httpRequest({ port, host: '127.0.0.1', path: '/', agent: false }, (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      });
      request.on('error', reject);
      request.end();
    });

  test('an array of 65 limiters is refused when the middleware is made', () => {
    assert.throws(() => rateLimit({ limiter: limiters(backend.store, 65) }), tooLarge);
    assert.throws(
      () => rateLimit({ routes: [{ path: '/api/*', limiter: limiters(backend.store, 65) }] }),
      tooLarge,
    );
  });

  test('a limiter function returning 64 decides; returning 65, the request fails with the code, nothing written', async () => {
    // As above: the keys are counted twice, within one minute.
    await clearOfWindowEnd(60_000, 5_000);
    chosen = limiters(backend.store, 64);
    assert.deepEqual(await get(), { status: 200, body: 'ok' });
    const before = await keys(backend);
    chosen = limiters(backend.store, 65);
    assert.deepEqual(await get(), { status: 500, body: ERROR_CODES.INVALID_OPTION });
    assert.equal(await keys(backend), before);
  });
});
