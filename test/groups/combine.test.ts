// all(): limits combined, atomically on one store and slot, side by side with refunds otherwise; in memory and on a real Redis.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  all,
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  gcra,
  type Limiter,
  MemoryStore,
  type Policy,
  RedisStore,
  SluiceError,
  type Store,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { keySlot } from '../../src/stores/redis/slot.js';
import { BACKENDS, type Backend, openBackend } from '../helpers/backends.js';
import { isCode } from '../helpers/errors.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { EXACT, unique } from '../helpers/suites.js';

const T0 = 1_700_000_000_000;
let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

// A busy machine must not turn a slow reply into a timeout decision: these tests assert exact decisions.
function make(store: Store, policy: Policy, label: string, clock?: () => number): Limiter {
  return createLimiter(
    clock === undefined
      ? { store, policy, name: unique(label), timeoutMs: 60_000 }
      : { store, policy, name: unique(label), clock, timeoutMs: 60_000 },
  );
}

async function exists(backend: Backend, key: string): Promise<boolean> {
  if (backend.redis === undefined) throw new Error('memory has no EXISTS');
  return Number(await backend.redis.command('EXISTS', key)) === 1;
}

for (const kind of BACKENDS) {
  describe(`all() on ${kind}`, () => {
    let backend: Backend;
    let store: Store;
    before(async () => {
      backend = await openBackend(kind, server);
      store = backend.store;
    });
    after(async () => {
      await backend.close();
    });

    test('with B exhausted, a request denied by B leaves A unchanged (atomic, one identifier)', async () => {
      const clock = () => T0;
      const a = make(store, gcra({ limit: 10, periodMs: 60_000 }), 'a', clock);
      const b = make(store, fixedWindow({ limit: 3, windowMs: 60_000 }), 'b', clock);
      const both = all([a, b]);
      assert.equal(both.atomic, true);
      for (let i = 0; i < 3; i++) assert.equal((await both.limit('k')).allowed, true);
      assert.equal((await a.peek('k')).remaining, 7);
      for (let i = 0; i < 10; i++) {
        const denied = await both.limit('k');
        assert.equal(denied.allowed, false);
        assert.deepEqual(denied.deniedBy, [b.name]);
        assert.equal(denied.limiter, b.name);
        assert.equal(denied.limit, 3);
        assert.equal(denied.remaining, 0);
        assert.equal(denied.retryAfterMs, 60_000 - (T0 % 60_000));
        assert.deepEqual(
          denied.decisions.map((d) => [d.name, d.allowed, d.remaining]),
          [
            [a.name, true, 7],
            [b.name, false, 0],
          ],
        );
      }
      assert.equal((await a.peek('k')).remaining, 7, "B's denials took nothing from A");
    });

    test('with B exhausted, a request denied by B leaves A unchanged (atomic, shared tag)', async () => {
      const clock = () => T0;
      const user = make(store, slidingLog({ limit: 10, windowMs: 60_000 }), 'user', clock);
      const tenant = make(store, slidingWindow({ limit: 2, windowMs: 60_000 }), 'tenant', clock);
      const both = all([user, tenant]);
      const tag = { tag: 'tenant:9' };
      assert.equal((await both.limit(['42', '9'], tag)).allowed, true);
      assert.equal((await both.limit(['43', '9'], tag)).allowed, true);
      const denied = await both.limit(['42', '9'], tag);
      assert.equal(denied.allowed, false);
      assert.deepEqual(denied.deniedBy, [tenant.name]);
      assert.equal((await user.peek('42', tag)).remaining, 9);
      assert.equal((await user.peek('43', tag)).remaining, 9);
      assert.equal((await tenant.peek('9', tag)).remaining, 0);
      if (backend.redis !== undefined) {
        assert.equal(await exists(backend, `rl:${user.name}:{tenant:9}:42`), true);
        assert.equal(await exists(backend, `rl:${tenant.name}:{tenant:9}:9`), true);
        assert.equal(
          await exists(backend, `rl:${user.name}:{42}`),
          false,
          'the tag replaced the default key',
        );
      }
    });

    test('with B exhausted, a request denied by B leaves A unchanged (atomic: false, grants refunded)', async () => {
      const clock = () => T0;
      const a = make(store, tokenBucket({ capacity: 10, refillPerSecond: 1 }), 'a', clock);
      const b = make(store, fixedWindow({ limit: 2, windowMs: 60_000 }), 'b', clock);
      const both = all([a, b], { atomic: false });
      assert.equal(both.atomic, false);
      // Different slots are fine when not atomic.
      assert.equal((await both.limit(['x', 'y'])).allowed, true);
      assert.equal((await both.limit(['x', 'y'])).allowed, true);
      for (let i = 0; i < 5; i++) {
        const denied = await both.limit(['x', 'y']);
        assert.equal(denied.allowed, false);
        assert.deepEqual(denied.deniedBy, [b.name]);
        assert.equal(denied.decisions[0]?.remaining, 8, 'the decision shows A after the refund');
      }
      assert.equal((await a.peek('x')).remaining, 8, "A's grants were refunded");
    });

    test('limiters on different stores are combined side by side, with refunds', async () => {
      const clock = () => T0;
      const other = new MemoryStore();
      try {
        const a = make(store, gcra({ limit: 5, periodMs: 60_000 }), 'a', clock);
        const b = make(other, fixedWindow({ limit: 1, windowMs: 60_000 }), 'b', clock);
        assert.throws(() => all([a, b], { atomic: true }), isCode(ERROR_CODES.INVALID_OPTION));
        const both = all([a, b]);
        assert.equal(both.atomic, false);
        assert.equal((await both.limit('k')).allowed, true);
        assert.equal((await both.limit('k')).allowed, false);
        assert.equal((await both.limit('k')).allowed, false);
        assert.equal((await a.peek('k')).remaining, 4);
      } finally {
        other.close();
      }
    });

    test('the combined decision: largest wait, smallest remaining, largest reset, every denier named', async () => {
      const clock = () => T0;
      const short = make(store, fixedWindow({ limit: 1, windowMs: 10_000 }), 'short', clock);
      const long = make(store, fixedWindow({ limit: 1, windowMs: 60_000 }), 'long', clock);
      const roomy = make(store, gcra({ limit: 100, periodMs: 60_000 }), 'roomy', clock);
      const three = all([short, long, roomy]);
      const first = await three.limit('k');
      assert.equal(first.allowed, true);
      assert.equal(first.remaining, 0);
      assert.equal(first.limiter, short.name, 'the first of the limiters with the fewest units left');
      assert.equal(first.retryAfterMs, 0);
      assert.equal(first.resetMs, 60_000 - (T0 % 60_000));
      const peeked = await three.peek('k');
      assert.equal(peeked.allowed, false);
      const denied = await three.limit('k');
      assert.equal(denied.allowed, false);
      assert.deepEqual(denied.deniedBy, [short.name, long.name]);
      assert.equal(denied.limiter, long.name);
      assert.equal(denied.retryAfterMs, Math.max(10_000 - (T0 % 10_000), 60_000 - (T0 % 60_000)));
      assert.equal(denied.remaining, 0);
      assert.equal((await roomy.peek('k')).remaining, 99);
    });

    test('keys of different slots are refused with ERR_SLUICE_CROSS_SLOT, nothing written', async () => {
      const user = make(store, gcra({ limit: 10, periodMs: 60_000 }), 'user');
      const tenant = make(store, gcra({ limit: 10, periodMs: 60_000 }), 'tenant');
      assert.notEqual(keySlot(store.keyFor(user.name, '42')), keySlot(store.keyFor(tenant.name, '9')));
      const both = all([user, tenant]);
      await assert.rejects(both.limit(['42', '9']), (error: unknown) => {
        assert.ok(error instanceof SluiceError);
        assert.equal(error.code, 'ERR_SLUICE_CROSS_SLOT');
        assert.match(error.message, /share a cluster slot/);
        assert.match(error.message, /tag/);
        return true;
      });
      await assert.rejects(both.peek(['42', '9']), isCode(ERROR_CODES.CROSS_SLOT));
      assert.equal((await user.peek('42')).remaining, 10);
      assert.equal((await tenant.peek('9')).remaining, 10);
      if (backend.redis !== undefined) {
        assert.equal(await exists(backend, store.keyFor(user.name, '42')), false);
        assert.equal(await exists(backend, store.keyFor(tenant.name, '9')), false);
      }
      // With a shared tag the same pair is one slot, and allowed.
      assert.equal(
        keySlot(store.keyFor(user.name, '42', 'tenant:9')),
        keySlot(store.keyFor(tenant.name, '9', 'tenant:9')),
      );
      assert.equal((await both.limit(['42', '9'], { tag: 'tenant:9' })).allowed, true);
    });

    test('bad calls reject and write nothing anywhere', async () => {
      const a = make(store, gcra({ limit: 100, periodMs: 60_000 }), 'a');
      const b = make(store, fixedWindow({ limit: 3, windowMs: 60_000 }), 'b');
      for (const atomic of [true, false]) {
        const both = all([a, b], { atomic });
        await assert.rejects(both.limit(['k']), isCode(ERROR_CODES.INVALID_IDENTIFIER));
        await assert.rejects(both.limit(['k', '']), isCode(ERROR_CODES.INVALID_IDENTIFIER));
        await assert.rejects(both.limit('k', { tag: '' }), isCode(ERROR_CODES.INVALID_IDENTIFIER));
        // 4 fits A but not B: A must not have been charged either.
        await assert.rejects(both.limit('k', { cost: 4 }), isCode(ERROR_CODES.COST_EXCEEDS_LIMIT));
        await assert.rejects(both.refund('k', 4), isCode(ERROR_CODES.COST_EXCEEDS_LIMIT));
      }
      assert.equal((await a.peek('k')).remaining, 100);
    });

    test('construction refuses what cannot be combined', () => {
      const a = make(store, gcra({ limit: 10, periodMs: 60_000 }), 'a');
      assert.throws(() => all([]), isCode(ERROR_CODES.INVALID_OPTION));
      assert.throws(() => all([a, a]), isCode(ERROR_CODES.INVALID_OPTION));
      const twin = createLimiter({ store, policy: gcra({ limit: 5, periodMs: 1000 }), name: a.name });
      assert.throws(
        () => all([a, twin]),
        /distinct from `limiters\[0\]\.name`|distinct from limiters\[0\]\.name/,
      );
      const clocked = make(store, gcra({ limit: 10, periodMs: 60_000 }), 'c', () => T0);
      assert.throws(() => all([a, clocked]), /share one `clock`/);
      assert.equal(all([a, clocked], { atomic: false }).atomic, false);
      assert.throws(
        () => all([a], { atomic: 'yes' as unknown as boolean }),
        isCode(ERROR_CODES.INVALID_OPTION),
      );
      assert.throws(() => all([a], { atomically: true } as never), isCode(ERROR_CODES.INVALID_OPTION));
    });

    test('refund and reset reach every limiter', async () => {
      const clock = () => T0;
      const a = make(store, fixedWindow({ limit: 5, windowMs: 60_000 }), 'a', clock);
      const b = make(store, fixedWindow({ limit: 5, windowMs: 60_000 }), 'b', clock);
      const both = all([a, b]);
      await both.limit('k', { cost: 3, tag: 't' });
      const refunded = await both.refund('k', 2, { tag: 't' });
      assert.deepEqual(
        refunded.decisions.map((d) => d.remaining),
        [4, 4],
      );
      await both.reset('k', { tag: 't' });
      assert.equal((await a.peek('k', { tag: 't' })).remaining, 5);
      assert.equal((await b.peek('k', { tag: 't' })).remaining, 5);
    });

    test('same-tag keys decide atomically under 500 concurrent requests: the tenant limit binds', async () => {
      const clock = () => T0;
      const user = make(store, slidingLog({ limit: 100, windowMs: 60_000 }), 'user', clock);
      const tenant = make(store, fixedWindow({ limit: 150, windowMs: 60_000 }), 'tenant', clock);
      const both = all([user, tenant]);
      const tag = { tag: 'tenant:9' };
      const users = ['u1', 'u2', 'u3', 'u4', 'u5'];
      await both.peek([users[0] as string, '9'], tag); // loads the script before counting calls
      const callsBefore = store instanceof RedisStore ? store.calls : 0;
      const requests: Array<Promise<[string, boolean]>> = [];
      for (let i = 0; i < 100; i++) {
        for (const id of users) requests.push(both.limit([id, '9'], tag).then((d) => [id, d.allowed]));
      }
      const results = await Promise.all(requests);
      const calls = store instanceof RedisStore ? store.calls - callsBefore : 500;
      assert.equal(results.length, 500);
      assert.equal(calls, 500, 'one script call per check');
      const passed = new Map(users.map((id) => [id, 0]));
      for (const [id, allowed] of results) if (allowed) passed.set(id, (passed.get(id) ?? 0) + 1);
      const total = [...passed.values()].reduce((sum, n) => sum + n, 0);
      assert.equal(total, 150, 'exactly the tenant limit passed');
      assert.equal((await tenant.peek('9', tag)).remaining, 0);
      for (const id of users) {
        // Denied requests took nothing: each user's log holds exactly its passed requests.
        assert.equal((await user.peek(id, tag)).remaining, 100 - (passed.get(id) ?? 0));
      }
    });

    test('same-tag keys decide atomically under 500 concurrent requests: the per-user limit binds', async () => {
      const clock = () => T0;
      const user = make(store, gcra({ limit: 20, periodMs: 3_600_000 }), 'user', clock);
      const tenant = make(store, slidingWindow({ limit: 150, windowMs: 60_000 }), 'tenant', clock);
      const both = all([user, tenant]);
      const tag = { tag: 'tenant:7' };
      const users = ['u1', 'u2', 'u3', 'u4', 'u5'];
      const requests: Array<Promise<[string, boolean]>> = [];
      for (let i = 0; i < 100; i++) {
        for (const id of users) requests.push(both.limit([id, '7'], tag).then((d) => [id, d.allowed]));
      }
      const results = await Promise.all(requests);
      const passed = new Map(users.map((id) => [id, 0]));
      for (const [id, allowed] of results) if (allowed) passed.set(id, (passed.get(id) ?? 0) + 1);
      assert.deepEqual([...passed.values()], [20, 20, 20, 20, 20]);
      assert.equal(
        (await tenant.peek('7', tag)).remaining,
        50,
        'the 400 denials took nothing from the tenant',
      );
    });
  });
}

test('key layout: unchanged without a tag, the tag in braces with one, both escaped', () => {
  const stores: Store[] = [new MemoryStore(), new RedisStore({ client: { sendCommand: async () => null } })];
  for (const store of stores) {
    assert.equal(store.keyFor('api', 'x'), 'rl:api:{x}');
    assert.equal(store.keyFor('user', '42', 'tenant:9'), 'rl:user:{tenant:9}:42');
    assert.equal(store.keyFor('user', 'a}b', 't{9}'), 'rl:user:{t%7B9%7D}:a%7Db');
    assert.equal(keySlot(store.keyFor('user', 'a}b', 't{9}')), keySlot('{t%7B9%7D}'));
    assert.equal(
      keySlot(store.keyFor('user', '42', 'tenant:9')),
      keySlot(store.keyFor('tenant', '9', 'tenant:9')),
    );
    if (store instanceof MemoryStore) store.close();
  }
});

describe('all() on Redis matches the memory store, every algorithm in one script', () => {
  const policies = (): Policy[] => [
    fixedWindow({ limit: 7, windowMs: 10_000 }),
    slidingLog({ limit: 6, windowMs: 12_000 }),
    slidingWindow({ limit: 8, windowMs: 9_000 }),
    tokenBucket({ capacity: 5, refillPerSecond: 0.5 }),
    gcra({ limit: 9, periodMs: 20_000, burst: 4 }),
  ];
  for (const mode of ['scripts', 'functions'] as const) {
    test(`ioredis, ${mode}`, async () => {
      const redis = await openBackend('ioredis', server, { mode });
      const memory = new MemoryStore();
      try {
        let now = T0;
        const clock = () => now;
        const label = unique('mix');
        const onRedis = all(
          policies().map((policy, i) =>
            createLimiter({ ...EXACT, store: redis.store, policy, name: `${label}-${i}`, clock }),
          ),
        );
        const inMemory = all(
          policies().map((policy, i) =>
            createLimiter({ store: memory, policy, name: `${label}-${i}`, clock }),
          ),
        );
        let allowed = 0;
        for (let step = 0; step < 60; step++) {
          now += (step * 7919) % 1500;
          const cost = 1 + (step % 3);
          const [fromRedis, fromMemory] = await Promise.all([
            onRedis.limit('k', { cost }),
            inMemory.limit('k', { cost }),
          ]);
          assert.deepEqual(fromRedis, fromMemory, `step ${step}`);
          if (fromRedis.allowed) allowed++;
        }
        assert.ok(allowed > 5 && allowed < 55, `both verdicts were exercised (${allowed} of 60 allowed)`);
      } finally {
        memory.close();
        await redis.close();
      }
    });
  }
});
