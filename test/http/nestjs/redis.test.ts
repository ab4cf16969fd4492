// A real Nest application on Redis, on Express and on Fastify: the common behaviour, and 500 requests at once at a
// limit of 100 answered with exactly 100 allowed, per-route limits and a skipped route beside them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import {
  RateLimit,
  RateLimitDecision,
  type RateLimitInfo,
  SkipRateLimit,
  SluiceGuard,
  SluiceModule,
} from '../../../src/http/adapters/nestjs.js';
import { createLimiter, fixedWindow, gcra, RedisStore } from '../../../src/index.js';
import { type Connected, connect } from '../../helpers/clients.js';
import { burst, statusCounts } from '../../helpers/http/burst.js';
import { conformance } from '../../helpers/http/conformance.js';
import { buildNest, PLATFORMS, start } from '../../helpers/http/nestjs.js';
import { assertExactBurst, header, NOW, WINDOW_MS } from '../../helpers/http/support.js';
import { type RedisServer, startRedis } from '../../helpers/redis-server.js';

let server: RedisServer;
let connected: Connected;
let prefixes = 0;

before(async () => {
  server = await startRedis();
  connected = await connect('ioredis', server.port);
});
after(async () => {
  await connected.close();
  await server.stop();
});

/** A store on a prefix of its own. A busy machine must not turn a slow reply into a timeout decision. */
const storeOf = () => new RedisStore({ client: connected.client, prefix: `nest${++prefixes}` });

for (const platform of PLATFORMS) {
  conformance(
    `nestjs (${platform}) on redis`,
    buildNest(platform),
    (limit, name = 'api', clock = () => NOW, overrides = false) => {
      const store = storeOf();
      const policy = fixedWindow({ limit, windowMs: WINDOW_MS });
      return {
        limiter: createLimiter({ store, policy, name, clock, timeoutMs: 60_000, overrides }),
        store,
        close: () => {},
      };
    },
  );

  describe(`nestjs (${platform}) on redis: 500 requests at once`, () => {
    it('at a limit of 100, exactly 100 allowed, each with its own count; a route limited to 2 and a skipped route beside it', async () => {
      const store = storeOf();
      // GCRA over an hour: a burst of 100 and no refill during the test (no window edge to straddle).
      const hourly = (limit: number, name: string) =>
        createLimiter({ store, policy: gcra({ limit, periodMs: 3_600_000 }), name, timeoutMs: 60_000 });
      const api = hourly(100, 'api');

      @Controller()
      class BurstController {
        @Get('burst')
        burst(@RateLimitDecision() decision: RateLimitInfo | undefined): string {
          return String(decision?.remaining);
        }

        @Get('small')
        @RateLimit('small')
        small(): string {
          return 'small';
        }

        @Get('health')
        @SkipRateLimit()
        health(): string {
          return 'up';
        }
      }

      @Module({
        imports: [SluiceModule.forRoot({ limiter: api, limiters: [hourly(2, 'small')] })],
        controllers: [BurstController],
        providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
      })
      class BurstModule {}

      const app = await start(platform, BurstModule);
      try {
        const [replies, small, health] = await Promise.all([
          burst(`${app.url}/burst`, 500),
          burst(`${app.url}/small`, 20),
          burst(`${app.url}/health`, 20),
        ]);
        assertExactBurst(replies, 'api', 100);
        assert.deepEqual(statusCounts(small), { 200: 2, 429: 18 }, 'the route’s own limiter, as exact');
        assert.equal(header(small[0]?.headers ?? {}, 'ratelimit')?.includes('"api"'), false);
        assert.deepEqual(statusCounts(health), { 200: 20 }, 'the skipped route');
        assert.equal(header(health[0]?.headers ?? {}, 'ratelimit'), undefined);
      } finally {
        await app.close();
      }
    });
  });
}
