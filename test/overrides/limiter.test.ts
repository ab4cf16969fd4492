// Limits and denials stored per identifier (overrides: true): what the limiter's methods write, what the next
// decision reads, what wins, what expires, and what is refused with nothing written; in memory and on Redis.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  gcra,
  type Limiter,
  MemoryStore,
  type Policy,
  type Store,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { keySlot } from '../../src/stores/redis/slot.js';
import { throttle } from '../../src/throttle/index.js';
import { BACKENDS, openBackend } from '../helpers/backends.js';
import { isCode } from '../helpers/errors.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { keysWithoutExpiry, unique } from '../helpers/suites.js';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/** A limiter of 10 per minute reading stored entries, on a clock the test moves. */
function limiterOn(
  store: Store,
  time: { now: number },
  policy: Policy = fixedWindow({ limit: 10, windowMs: 60_000 }) as Policy,
): Limiter {
  return createLimiter({
    store,
    policy,
    name: unique('st'),
    clock: () => time.now,
    overrides: true,
    timeoutMs: 60_000,
  });
}

for (const kind of BACKENDS) {
  describe(`stored limits and denials (${kind})`, () => {
    test('a stored limit decides the next call, a call limit wins over it, and clearing it restores the policy', async () => {
      const backend = await openBackend(kind, server);
      try {
        const time = { now: 1_700_000_000_000 };
        const limiter = limiterOn(backend.store, time);
        assert.equal((await limiter.limit('acme')).limit, 10);
        await limiter.setLimit('acme', 25);
        const raised = await limiter.limit('acme');
        assert.deepEqual([raised.limit, raised.remaining], [25, 23]);
        assert.equal(
          (await limiter.limit('acme', { limit: 3 })).allowed,
          true,
          'the call limit decides: 3 used of 3',
        );
        assert.equal((await limiter.limit('acme', { limit: 3 })).allowed, false);
        assert.equal((await limiter.limit('other')).limit, 10, 'other identifiers keep the policy');
        assert.deepEqual(await limiter.getLimit('acme'), {
          identifier: 'acme',
          tag: undefined,
          limit: 25,
          expiresInMs: undefined,
        });
        assert.equal(await limiter.clearLimit('acme'), true);
        assert.equal(await limiter.clearLimit('acme'), false);
        assert.equal(await limiter.getLimit('acme'), undefined);
        const restored = await limiter.limit('acme');
        assert.deepEqual([restored.limit, restored.remaining], [10, 6]);
      } finally {
        await backend.close();
      }
    });

    test('GCRA and the bucket scale rate and burst with a stored limit, as with a call limit', async () => {
      const backend = await openBackend(kind, server);
      try {
        const time = { now: 1_700_000_000_000 };
        for (const policy of [
          gcra({ limit: 10, periodMs: 1000, burst: 4 }),
          tokenBucket({ capacity: 4, refillPerSecond: 4 }),
        ]) {
          const stored = limiterOn(backend.store, time, policy);
          const perCall = limiterOn(backend.store, time, policy);
          await stored.setLimit('a', policy.limit * 3);
          for (let i = 0; i < 15; i++) {
            const expected = await perCall.limit('a', { limit: policy.limit * 3 });
            assert.deepEqual(await stored.limit('a'), expected, `${policy.description}, call ${i}`);
          }
        }
      } finally {
        await backend.close();
      }
    });

    test('a denial refuses without looking at the quota, ends by itself, and undeny ends it at once', async () => {
      const backend = await openBackend(kind, server);
      try {
        const time = { now: 1_700_000_000_000 };
        const limiter = limiterOn(backend.store, time);
        await limiter.limit('mallory');
        await limiter.deny('mallory', { forMs: 30_000 });
        const denied = await limiter.limit('mallory');
        assert.deepEqual(denied, {
          allowed: false,
          limit: 10,
          remaining: 0,
          resetMs: 30_000,
          retryAfterMs: 30_000,
          reason: 'denied',
        });
        assert.equal((await limiter.peek('mallory')).reason, 'denied');
        assert.equal((await limiter.refund('mallory')).reason, undefined, 'giving back is never denied');
        assert.equal((await limiter.limit('bob')).allowed, true);
        const [listed] = await limiter.listDenials();
        assert.equal(listed?.identifier, 'mallory');
        time.now += 29_999;
        assert.equal((await limiter.limit('mallory')).retryAfterMs, 1);
        time.now += 1;
        const after = await limiter.limit('mallory');
        assert.deepEqual(
          [after.allowed, after.reason, after.remaining],
          [true, undefined, 9],
          'the quota was untouched',
        );
        await limiter.deny('mallory');
        assert.equal((await limiter.limit('mallory')).retryAfterMs, 3_600_000, 'an hour by default');
        assert.equal(await limiter.undeny('mallory'), true);
        assert.equal((await limiter.limit('mallory')).allowed, true);
      } finally {
        await backend.close();
      }
    });

    test('a denial stops every operation that takes units on every algorithm: wait(), a scheduled slot, throttle()', async () => {
      const backend = await openBackend(kind, server);
      try {
        const time = { now: 1_700_000_000_000 };
        const policies: Array<[string, Policy]> = [
          ['fixedWindow', fixedWindow({ limit: 10, windowMs: 60_000 }) as Policy],
          ['slidingWindow', slidingWindow({ limit: 10, windowMs: 60_000 }) as Policy],
          ['slidingLog', slidingLog({ limit: 10, windowMs: 60_000 }) as Policy],
          ['gcra', gcra({ limit: 10, periodMs: 60_000 }) as Policy],
          ['tokenBucket', tokenBucket({ capacity: 10, refillPerSecond: 1 }) as Policy],
        ];
        for (const [label, policy] of policies) {
          const limiter = limiterOn(backend.store, time, policy);
          await limiter.deny('bad', { forMs: 60_000 });
          const waited = await limiter.wait('bad', { maxWaitMs: 1000 });
          assert.deepEqual(
            [waited.allowed, waited.reason, waited.retryAfterMs],
            [false, 'denied', 60_000],
            `${label}: wait() is refused by the denial`,
          );
          if (policy.schedules === true) {
            let made = 0;
            const calls = throttle({ limiter, key: 'bad', maxWaitMs: 1000 });
            await assert.rejects(
              calls.run(() => made++),
              isCode(ERROR_CODES.MAX_WAIT),
            );
            assert.equal(made, 0, `${label}: the throttled call was not made`);
          }
          assert.equal(await limiter.undeny('bad'), true);
          const after = await limiter.peek('bad');
          assert.equal(after.remaining, 10, `${label}: nothing was taken while denied`);
        }
      } finally {
        await backend.close();
      }
    });

    test('tags: entries of a tagged identifier are its own, listed with their tag', async () => {
      const backend = await openBackend(kind, server);
      try {
        const time = { now: 1_700_000_000_000 };
        const limiter = limiterOn(backend.store, time);
        await limiter.setLimit('u1', 40, { tag: 'tenant{9}' });
        await limiter.setLimit('u2', 50, { ttlMs: 60_000 });
        assert.equal((await limiter.limit('u1')).limit, 10);
        assert.equal((await limiter.limit('u1', { tag: 'tenant{9}' })).limit, 40);
        const limits = await limiter.listLimits();
        assert.deepEqual(
          limits.map(({ identifier, tag, limit }) => ({ identifier, tag, limit })),
          [
            { identifier: 'u1', tag: 'tenant{9}', limit: 40 },
            { identifier: 'u2', tag: undefined, limit: 50 },
          ],
        );
        const kept = limits[1]?.expiresInMs ?? 0;
        assert.ok(kept > 0 && kept <= 60_000, `expires in ${kept} ms`);
      } finally {
        await backend.close();
      }
    });

    test('bad calls are refused before anything is written', async () => {
      const backend = await openBackend(kind, server);
      try {
        const time = { now: 1_700_000_000_000 };
        const limiter = limiterOn(backend.store, time, slidingLog({ limit: 5, windowMs: 1000 }));
        await assert.rejects(limiter.setLimit('a', 0), isCode(ERROR_CODES.INVALID_LIMIT));
        await assert.rejects(limiter.setLimit('a', 2.5), isCode(ERROR_CODES.INVALID_LIMIT));
        await assert.rejects(limiter.setLimit('a', 5000), isCode(ERROR_CODES.LIMIT_TOO_HIGH));
        await assert.rejects(limiter.setLimit('', 5), isCode(ERROR_CODES.INVALID_IDENTIFIER));
        await assert.rejects(limiter.setLimit('a', 5, { ttlMs: -1 }), isCode(ERROR_CODES.INVALID_OPTION));
        await assert.rejects(limiter.deny('a', { forMs: 0 }), isCode(ERROR_CODES.INVALID_OPTION));
        await assert.rejects(limiter.deny('a', { for: 10 } as never), isCode(ERROR_CODES.INVALID_OPTION));
        assert.deepEqual(await limiter.listLimits(), []);
        assert.deepEqual(await limiter.listDenials(), []);
        const plain = createLimiter({
          store: backend.store,
          policy: fixedWindow({ limit: 1, windowMs: 1000 }),
          name: 'plain',
        });
        await assert.rejects(plain.setLimit('a', 5), (error: Error) => {
          assert.ok(isCode(ERROR_CODES.INVALID_OPTION)(error));
          assert.match(error.message, /Expected `overrides` to be true for setLimit\(\)/);
          return true;
        });
        await assert.rejects(plain.deny('a'), isCode(ERROR_CODES.INVALID_OPTION));
      } finally {
        await backend.close();
      }
    });

    test('a denial is not remembered by the deny cache: undeny reaches the next decision', async () => {
      const backend = await openBackend(kind, server);
      try {
        const limiter = createLimiter({
          store: backend.store,
          policy: fixedWindow({ limit: 10, windowMs: 60_000 }),
          name: unique('dc'),
          overrides: true,
          denyCache: true,
        });
        await limiter.deny('eve', { forMs: 60_000 });
        assert.equal((await limiter.limit('eve')).reason, 'denied');
        await limiter.undeny('eve');
        assert.equal((await limiter.limit('eve')).allowed, true);
      } finally {
        await backend.close();
      }
    });
  });
}

describe('stored entries in Redis', () => {
  test('entries share their identifier’s slot; denials and their index expire; limits are kept until cleared', async () => {
    const backend = await openBackend('ioredis', server);
    try {
      const redis = backend.redis as NonNullable<typeof backend.redis>;
      const name = unique('keys');
      const limiter = createLimiter({
        store: backend.store,
        policy: fixedWindow({ limit: 10, windowMs: 1000 }),
        name,
        overrides: true,
      });
      await limiter.setLimit('x{1}', 20, { tag: 't' });
      await limiter.deny('x{1}', { forMs: 5000, tag: 't' });
      const state = backend.store.keyFor(name, 'x{1}', 't');
      assert.equal(await redis.command('GET', `${state}%limit`), '20');
      assert.equal(keySlot(`${state}%limit`), keySlot(state));
      assert.equal(keySlot(`${state}%deny`), keySlot(state));
      const pttl = Number(await redis.command('PTTL', `${state}%deny`));
      assert.ok(pttl > 0 && pttl <= 5000);
      assert.ok(
        Number(await redis.command('PTTL', `rl:${name}:%deny`)) > 0,
        'the denials index expires with its last',
      );
      assert.deepEqual(
        (await keysWithoutExpiry(redis, `rl:${name}*`)).sort(),
        [`${state}%limit`, `rl:${name}:%limit`].sort(),
      );
      await limiter.clearLimit('x{1}', { tag: 't' });
      await limiter.undeny('x{1}', { tag: 't' });
      assert.deepEqual(await keysWithoutExpiry(redis, `rl:${name}*`), []);
      assert.equal(Number(await redis.command('EXISTS', `rl:${name}:%limit`, `rl:${name}:%deny`)), 0);
    } finally {
      await backend.close();
    }
  });

  test('overrides needs a store that keeps entries', () => {
    const store: Store = {
      kind: 'custom',
      decide: async () => ({ allowed: true, remaining: 1, resetMs: 0, retryAfterMs: 0 }),
      reset: async () => {},
      keyFor: () => 'k',
    };
    assert.throws(
      () =>
        createLimiter({
          store,
          policy: fixedWindow({ limit: 1, windowMs: 1000 }),
          name: 'c',
          overrides: true,
        }),
      isCode(ERROR_CODES.INVALID_OPTION),
    );
    assert.doesNotThrow(() =>
      createLimiter({
        store: new MemoryStore(),
        policy: fixedWindow({ limit: 1, windowMs: 1000 }),
        name: 'c',
        overrides: true,
      }),
    );
  });
});
