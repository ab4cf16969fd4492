// Penalties on the core's request path: what earns one, where it is kept, and keys too long for one identifier.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { evaluate } from '../../src/http/handle.js';
import { resolveRateLimitOptions } from '../../src/http/options.js';
import type { RequestView } from '../../src/http/view.js';
import {
  createLimiter,
  fixedWindow,
  gcra,
  MemoryStore,
  type Store,
  type StoreRequest,
} from '../../src/index.js';
import { memoryLimiter, NOW } from '../helpers/http/support.js';

const view: RequestView = { method: 'GET', path: '/', remoteAddress: '192.0.2.1', header: () => undefined };
const ban = { after: 0, windowMs: 60_000, durationMs: 60_000 };

describe('penalties', () => {
  it('a limiter failing closed refuses with 503 and earns the client no penalty', async () => {
    const asked: StoreRequest[] = [];
    const down: Store = {
      kind: 'down',
      decide: (request) => {
        asked.push(request);
        return Promise.reject(new Error('connection refused'));
      },
      reset: async () => {},
      keyFor: (name, identifier) => `${name}:${identifier}`,
    };
    const limiter = createLimiter({
      store: down,
      policy: fixedWindow({ limit: 5, windowMs: 60_000 }),
      name: 'api',
      onStoreError: 'deny',
    });
    const config = resolveRateLimitOptions('test', { limiter, ban, block: { durationMs: 1_000 } });
    const evaluation = await evaluate(config, {}, view, {});
    assert.equal(evaluation.kind === 'deny' ? evaluation.refusal.status : 0, 503);
    assert.deepEqual(
      asked.map((request) => `${request.name} ${request.operation}`).sort(),
      ['api limit', 'api:ban peek', 'api:block peek'],
      'the penalties were looked at, never counted or started',
    );
  });

  it('a ban is kept in the store under the limiter’s name, for every middleware on that store', async () => {
    const { limiter, store, close } = memoryLimiter(1);
    try {
      const first = resolveRateLimitOptions('first', { limiter, ban });
      const second = resolveRateLimitOptions('second', { limiter, ban });
      await evaluate(first, {}, view, {});
      const banned = await evaluate(first, {}, view, {});
      assert.equal(banned.kind === 'deny' ? banned.refusal.status : 0, 403);
      const ban403 = await evaluate(second, {}, view, {});
      assert.equal(ban403.kind === 'deny' ? ban403.refusal.status : 0, 403, 'another middleware sees it');
      // Any limiter of that name and policy on the store reads the ban: it lives there, not in a middleware.
      const look = createLimiter({
        store,
        policy: gcra({ limit: 1, periodMs: 60_000 }),
        name: 'api:ban',
        clock: () => NOW,
      });
      const seen = await look.peek('192.0.2.1');
      assert.equal(seen.allowed, false);
      assert.equal(seen.retryAfterMs, 60_000);
    } finally {
      close();
    }
  });

  it('identifiers too long together for one key are hashed for the penalties, not refused', async () => {
    const store = new MemoryStore();
    try {
      const policy = fixedWindow({ limit: 1, windowMs: 60_000 });
      const clock = () => NOW; // one clock: an atomic group reads one time
      const user = createLimiter({ store, policy, name: 'user', clock });
      const tenant = createLimiter({ store, policy, name: 'tenant', clock });
      const long = ['u'.repeat(700), 't'.repeat(700)] as const;
      const config = resolveRateLimitOptions('test', {
        limiter: [user, tenant],
        key: () => long,
        tag: 't',
        ban,
      });
      assert.equal((await evaluate(config, {}, view, {})).kind, 'allow');
      const banned = await evaluate(config, {}, view, {});
      assert.equal(banned.kind === 'deny' ? banned.refusal.status : 0, 403);
      assert.deepEqual(banned.kind === 'deny' ? banned.refusal.problem['violated-policies'] : [], [
        'user',
        'tenant',
        'user+tenant:ban',
      ]);
    } finally {
      store.close();
    }
  });
});
