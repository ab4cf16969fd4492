// @nestjs/throttler with its own guard and decorators over SluiceThrottlerStorage on Redis: exact counts at once,
// across two application instances (where throttler's own storage lets each instance count alone), and blocks.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Controller, Get, Module, type Type } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import {
  SkipThrottle,
  Throttle,
  ThrottlerGuard,
  ThrottlerModule,
  type ThrottlerOptions,
  type ThrottlerStorage,
} from '@nestjs/throttler';
import request from 'supertest';
import { SluiceThrottlerStorage } from '../../../src/http/adapters/nestjs.js';
import { MemoryStore, RedisStore, SluiceError, slidingLog } from '../../../src/index.js';
import { type Connected, connect } from '../../helpers/clients.js';
import { burst, statusCounts } from '../../helpers/http/burst.js';
import { PLATFORMS, type Platform, type Running, start } from '../../helpers/http/nestjs.js';
import { NOW, testClock } from '../../helpers/http/support.js';
import { type RedisServer, startRedis } from '../../helpers/redis-server.js';
import { clearOfWindowEnd } from '../../helpers/window.js';

const DAY_MS = 86_400_000;

let server: RedisServer;
let connected: Connected;
let prefixes = 0;

before(async () => {
  server = await startRedis();
  connected = await connect('ioredis', server.port);
  // The day-long fixed windows (aligned to the clock) must not roll over mid-test.
  await clearOfWindowEnd(DAY_MS, 30_000);
});
after(async () => {
  await connected.close();
  await server.stop();
});

/** Sluice's storage on a prefix of its own, on `client` (another connection: another process's). */
function sluiceStorage(
  client: unknown = connected.client,
  prefix = `throttle${++prefixes}`,
  clock?: () => number,
) {
  // A busy machine must not turn a slow reply into a timeout decision.
  return new SluiceThrottlerStorage({
    store: new RedisStore({ client, prefix }),
    timeoutMs: 60_000,
    ...(clock === undefined ? {} : { clock }),
  });
}

/** An application as a throttler user writes it: its module, its guard, its decorators; `storage` underneath. */
function throttledApp(throttlers: ThrottlerOptions[], storage: ThrottlerStorage | undefined): Type {
  @Controller()
  class HitsController {
    @Get('hits')
    hits(): string {
      return 'ok';
    }

    @Get('three')
    @Throttle({ default: { limit: 3, ttl: DAY_MS } })
    three(): string {
      return 'three';
    }

    @Get('free')
    @SkipThrottle()
    free(): string {
      return 'free';
    }
  }

  @Module({
    imports: [ThrottlerModule.forRoot({ throttlers, ...(storage === undefined ? {} : { storage }) })],
    controllers: [HitsController],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })
  class ThrottledModule {}
  return ThrottledModule;
}

async function withApps(
  platform: Platform,
  roots: readonly Type[],
  run: (apps: readonly Running[]) => Promise<void>,
): Promise<void> {
  const apps: Running[] = [];
  try {
    for (const root of roots) apps.push(await start(platform, root));
    await run(apps);
  } finally {
    for (const app of apps) await app.close();
  }
}

for (const platform of PLATFORMS) {
  describe(`@nestjs/throttler (${platform}) over SluiceThrottlerStorage on redis`, () => {
    it('500 requests at once at a limit of 100: exactly 100 allowed; @Throttle and @SkipThrottle as before', () =>
      withApps(platform, [throttledApp([{ limit: 100, ttl: DAY_MS }], sluiceStorage())], async ([app]) => {
        const url = app?.url ?? '';
        const [hits, three, free] = await Promise.all([
          burst(`${url}/hits`, 500),
          burst(`${url}/three`, 20),
          burst(`${url}/free`, 20),
        ]);
        assert.deepEqual(statusCounts(hits), { 200: 100, 429: 400 });
        const remaining = hits
          .filter((reply) => reply.status === 200)
          .map((reply) => Number(reply.headers['x-ratelimit-remaining']))
          .sort((a, b) => a - b);
        assert.deepEqual(
          remaining,
          Array.from({ length: 100 }, (_, i) => i),
          "throttler's headers, each its own count",
        );
        for (const reply of hits.filter((reply) => reply.status === 429)) {
          assert.ok(Number(reply.headers['retry-after']) >= 1, 'Retry-After from the block');
          assert.match(reply.body, /ThrottlerException/);
        }
        assert.deepEqual(statusCounts(three), { 200: 3, 429: 17 }, "a route's @Throttle");
        assert.deepEqual(statusCounts(free), { 200: 20 }, '@SkipThrottle');
      }));
  });
}

describe('@nestjs/throttler: two application instances (as two processes) sharing one Redis', () => {
  const twoInstances = (storages: () => ThrottlerStorage | undefined) =>
    [storages(), storages()].map((storage) => throttledApp([{ limit: 100, ttl: DAY_MS }], storage));

  it('with sluice underneath, 250 requests at once to each: exactly 100 in all', async () => {
    const prefix = `shared${++prefixes}`;
    const second = await connect('ioredis', server.port);
    try {
      const clients = [connected.client, second.client];
      const roots = clients.map((client) =>
        throttledApp([{ limit: 100, ttl: DAY_MS }], sluiceStorage(client, prefix)),
      );
      await withApps('express', roots, async (apps) => {
        const replies = await Promise.all(apps.map((app) => burst(`${app.url}/hits`, 250)));
        assert.deepEqual(statusCounts(replies.flat()), { 200: 100, 429: 400 });
      });
    } finally {
      await second.close();
    }
  });

  it("with throttler's own storage, each instance counts alone: 200 in all", () =>
    withApps(
      'express',
      twoInstances(() => undefined),
      async (apps) => {
        const replies = await Promise.all(apps.map((app) => burst(`${app.url}/hits`, 250)));
        assert.deepEqual(statusCounts(replies.flat()), { 200: 200, 429: 300 });
      },
    ));
});

describe('@nestjs/throttler over SluiceThrottlerStorage: blockDuration', () => {
  it('a refused client stays blocked for blockDuration, past the end of its window, then counts again', async () => {
    const clock = testClock(); // NOW is the start of a 10 s window
    assert.equal(NOW % 10_000, 0);
    const storage = sluiceStorage(connected.client, `block${++prefixes}`, clock.now);
    const root = throttledApp([{ limit: 2, ttl: 10_000, blockDuration: 30_000 }], storage);
    await withApps('express', [root], async ([app]) => {
      const agent = request(app?.url ?? '');
      const first = await agent.get('/hits');
      assert.equal(first.headers['x-ratelimit-remaining'], '1');
      assert.equal(first.headers['x-ratelimit-reset'], '10');
      assert.equal((await agent.get('/hits')).headers['x-ratelimit-remaining'], '0');
      const refused = await agent.get('/hits');
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['retry-after'], '30', 'the block, not the window’s 10 s');
      clock.advance(10_000);
      const blocked = await agent.get('/hits');
      assert.equal(blocked.status, 429, 'a new window, still blocked');
      assert.equal(blocked.headers['retry-after'], '20');
      clock.advance(20_000);
      const back = await agent.get('/hits');
      assert.equal(back.status, 200);
      assert.equal(back.headers['x-ratelimit-remaining'], '1');
    });
  });
});

describe('SluiceThrottlerStorage: the records its guard reads', () => {
  it('counts, times in seconds, blocks; blockDuration 0 refuses until the window ends, without a block', async () => {
    const clock = testClock();
    const store = new MemoryStore();
    try {
      const storage = new SluiceThrottlerStorage({ store, clock: clock.now });
      const hit = (blockDuration: number, name = 'default') =>
        storage.increment('k', 10_000, 2, blockDuration, name);
      assert.deepEqual(await hit(30_000), {
        totalHits: 1,
        timeToExpire: 10,
        isBlocked: false,
        timeToBlockExpire: 0,
      });
      clock.advance(4_000);
      assert.deepEqual(await hit(30_000), {
        totalHits: 2,
        timeToExpire: 6,
        isBlocked: false,
        timeToBlockExpire: 0,
      });
      assert.deepEqual(await hit(30_000), {
        totalHits: 3,
        timeToExpire: 6,
        isBlocked: true,
        timeToBlockExpire: 30,
      });
      await hit(0, 'unblocked');
      await hit(0, 'unblocked');
      assert.deepEqual(
        await hit(0, 'unblocked'),
        { totalHits: 3, timeToExpire: 6, isBlocked: true, timeToBlockExpire: 6 },
        'without a block, refused until the window ends',
      );
      clock.advance(6_000);
      assert.equal((await hit(0, 'unblocked')).isBlocked, false, 'the next window');
      assert.equal((await hit(30_000)).isBlocked, true, 'the block outlasts the window');
    } finally {
      store.close();
    }
  });

  it("policy: a sliding log counts each hit for ttl after it, as throttler's in-memory storage does", async () => {
    const clock = testClock();
    const store = new MemoryStore();
    try {
      const storage = new SluiceThrottlerStorage({
        store,
        clock: clock.now,
        policy: (limit, ttlMs) => slidingLog({ limit, windowMs: ttlMs }),
      });
      const hit = () => storage.increment('k', 10_000, 2, 0, 'default');
      await hit();
      clock.advance(5_000);
      await hit();
      clock.advance(5_000); // a fixed window would start afresh here; the second hit still counts
      assert.equal((await hit()).isBlocked, false);
      assert.equal((await hit()).isBlocked, true);
    } finally {
      store.close();
    }
  });

  it('bad options throw where the storage is made, naming the option', () => {
    const store = new MemoryStore();
    try {
      const cases: Array<[object, RegExp]> = [
        [{ store, timeoutMs: 0 }, /`timeoutMs`/],
        [{ store, windowMs: 1000 }, /windowMs/],
        [{ store, policy: 'gcra' }, /`policy`/],
        [{ store, name: 'a{b' }, /`name`/],
        [{}, /`store`/],
      ];
      for (const [options, message] of cases) {
        assert.throws(
          () => new SluiceThrottlerStorage(options as never),
          (error: unknown) =>
            error instanceof SluiceError &&
            error.code === 'ERR_SLUICE_INVALID_OPTION' &&
            message.test(error.message),
          String(message),
        );
      }
    } finally {
      store.close();
    }
  });
});
