// The `share` option: a region's part of a global budget, its rounding per algorithm, and its enforcement on every store.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  gcra,
  type Policy,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { wireOf } from '../../src/stores/redis/wire.js';
import { BACKENDS, type Backend, openBackend } from '../helpers/backends.js';
import { isCode } from '../helpers/errors.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const T0 = 1_700_000_040_000; // 0 ms into a 60 s window: T0 % 60_000 === 0
const MINUTE = 60_000;

const invalidOption = (pattern: RegExp) => isCode(ERROR_CODES.INVALID_OPTION, pattern);

describe('share: the scaled policy', () => {
  test('window policies scale the limit and round down', () => {
    assert.equal(fixedWindow({ limit: 100, windowMs: MINUTE, share: 0.25 }).limit, 25);
    assert.equal(slidingLog({ limit: 10, windowMs: MINUTE, share: 0.5 }).limit, 5);
    assert.equal(slidingWindow({ limit: 7, windowMs: MINUTE, share: 0.5 }).limit, 3);
    // 100 × 0.29 is 28.999999999999996 in floating point; the share means 29.
    assert.equal(fixedWindow({ limit: 100, windowMs: MINUTE, share: 0.29 }).limit, 29);
    assert.equal(slidingWindow({ limit: 1000, windowMs: MINUTE, share: 0.07 }).limit, 70);
    const scaled = fixedWindow({ limit: 100, windowMs: MINUTE, share: 0.25 });
    assert.deepEqual(wireOf(scaled).args, ['25', String(MINUTE)]);
    assert.equal(scaled.maxCost, 25);
    assert.equal(scaled.description, 'fixedWindow(limit=25,windowMs=60000,share=0.25)');
  });

  test('regions whose shares add up to 1 never admit more than the global limit together', () => {
    const splits = [
      [0.1, 0.2, 0.7],
      [0.5, 0.3, 0.2],
      [0.25, 0.25, 0.25, 0.25],
      [1 / 3, 1 / 3, 1 / 3],
    ];
    for (const limit of [10, 11, 99, 100, 1001]) {
      for (const shares of splits) {
        const total = shares
          .map((share) => fixedWindow({ limit, windowMs: MINUTE, share }).limit)
          .reduce((sum, n) => sum + n, 0);
        assert.ok(total <= limit, `limit ${limit} split ${shares.join('/')}: ${total}`);
        assert.ok(total > limit - shares.length, `rounding loses less than one unit per region (${total})`);
      }
    }
    // Shares written in decimal that add up exactly keep the whole budget.
    const exact = [0.1, 0.2, 0.7].map((share) => slidingLog({ limit: 10, windowMs: MINUTE, share }).limit);
    assert.deepEqual(exact, [1, 2, 7]);
  });

  test('a window policy left with less than one unit is refused', () => {
    assert.throws(
      () => fixedWindow({ limit: 3, windowMs: MINUTE, share: 0.25 }),
      invalidOption(/`fixedWindow.limit` × `fixedWindow.share` to be at least 1, got 3 × 0.25 = 0.75/),
    );
    assert.throws(() => slidingLog({ limit: 1, windowMs: MINUTE, share: 0.5 }), invalidOption(/slidingLog/));
    assert.throws(
      () => slidingWindow({ limit: 9, windowMs: MINUTE, share: 0.1 }),
      invalidOption(/slidingWindow/),
    );
    assert.equal(slidingWindow({ limit: 10, windowMs: MINUTE, share: 0.1 }).limit, 1);
  });

  test('gcra and the token bucket scale the rate exactly and the burst down, to at least 1', () => {
    const regional = gcra({ limit: 100, periodMs: MINUTE, share: 0.25 });
    assert.equal(regional.limit, 25);
    assert.deepEqual(wireOf(regional).args, ['2400', '60000']); // 25 per minute: one every 2.4 s, burst 25
    assert.equal(regional.description, 'gcra(limit=100,periodMs=60000,burst=100,share=0.25)');
    const smooth = gcra({ limit: 100, periodMs: MINUTE, burst: 1, share: 0.25 });
    assert.equal(smooth.limit, 1);
    assert.deepEqual(wireOf(smooth).args, ['2400', '2400']);
    const bucket = tokenBucket({ capacity: 10, refillPerSecond: 2, share: 0.25 });
    assert.equal(bucket.limit, 2);
    assert.deepEqual(wireOf(bucket).args, ['2000', '4000']); // half a token per second, two at most
    assert.equal(bucket.windowMs, 4000);
    assert.equal(tokenBucket({ capacity: 3, refillPerSecond: 1, share: 0.25 }).limit, 1);
  });

  test('share must be a number greater than 0 and at most 1', () => {
    const make: Array<[string, (share: unknown) => Policy]> = [
      ['fixedWindow', (share) => fixedWindow({ limit: 10, windowMs: MINUTE, share } as never)],
      ['slidingLog', (share) => slidingLog({ limit: 10, windowMs: MINUTE, share } as never)],
      ['slidingWindow', (share) => slidingWindow({ limit: 10, windowMs: MINUTE, share } as never)],
      ['tokenBucket', (share) => tokenBucket({ capacity: 10, refillPerSecond: 1, share } as never)],
      ['gcra', (share) => gcra({ limit: 10, periodMs: MINUTE, share } as never)],
    ];
    for (const [name, policy] of make) {
      for (const bad of [0, -0.5, 1.01, 2, Number.NaN, Number.POSITIVE_INFINITY, '0.5', null]) {
        assert.throws(
          () => policy(bad),
          invalidOption(new RegExp(`\`${name}.share\` to be a number greater than 0 and at most 1`)),
          `${name} share ${String(bad)}`,
        );
      }
      const whole = policy(1);
      const unset = policy(undefined);
      assert.deepEqual(
        [whole.limit, wireOf(whole).args, whole.description],
        [unset.limit, wireOf(unset).args, unset.description],
      );
    }
  });
});

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

for (const kind of BACKENDS) {
  describe(`share enforced on ${kind}`, () => {
    let backend: Backend;
    before(async () => {
      backend = await openBackend(kind, server);
    });
    after(async () => {
      await backend.close();
    });

    test('a quarter of a fixed window of 100 admits 25', async () => {
      const limiter = createLimiter({
        store: backend.store,
        policy: fixedWindow({ limit: 100, windowMs: MINUTE, share: 0.25 }),
        name: `share-fixed-${kind}`,
        clock: () => T0,
        timeoutMs: 60_000, // exact counts: a slow reply on a busy machine must not become a timeout decision
      });
      let allowed = 0;
      for (let i = 0; i < 40; i++) if ((await limiter.limit('k')).allowed) allowed++;
      assert.equal(allowed, 25);
    });

    test('a quarter of gcra 100 per minute: a burst of 25, then one every 2.4 s', async () => {
      let now = T0;
      const limiter = createLimiter({
        store: backend.store,
        policy: gcra({ limit: 100, periodMs: MINUTE, share: 0.25 }),
        name: `share-gcra-${kind}`,
        clock: () => now,
        timeoutMs: 60_000,
      });
      let allowed = 0;
      for (let i = 0; i < 30; i++) if ((await limiter.limit('k')).allowed) allowed++;
      assert.equal(allowed, 25);
      const denied = await limiter.limit('k');
      assert.equal(denied.retryAfterMs, 2400);
      now += 2400;
      assert.equal((await limiter.limit('k')).allowed, true);
      assert.equal((await limiter.limit('k')).allowed, false);
    });
  });
}
