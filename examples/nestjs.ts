// NestJS + Redis: 5 requests a minute per address on every route, /search by a stricter limiter named in its
// decorator, /health not limited, and the decision handed to a handler. Nest's usual tsconfig: decorators on.
import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { createLimiter, gcra, RedisStore, slidingWindow } from 'sluice';
import {
  RateLimit,
  RateLimitDecision,
  type RateLimitInfo,
  SkipRateLimit,
  SluiceGuard,
  SluiceModule,
} from 'sluice/nestjs';

// Fail fast while Redis is down (no offline queue, no resend): the limiter decides at once instead.
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

const store = new RedisStore({ client: redis });
const api = createLimiter({ store, policy: slidingWindow({ limit: 5, windowMs: 60_000 }), name: 'api' });
// Two searches a minute, evenly spaced, both at once allowed.
const search = createLimiter({ store, policy: gcra({ limit: 2, periodMs: 60_000 }), name: 'search' });

@Controller()
class AppController {
  @Get()
  hello(@RateLimitDecision() decision: RateLimitInfo | undefined): { remaining: number | undefined } {
    return { remaining: decision?.remaining };
  }

  @Get('search')
  @RateLimit('search')
  find(): { results: string[] } {
    return { results: [] };
  }

  @Get('health')
  @SkipRateLimit()
  health(): string {
    return 'up';
  }
}

@Module({
  imports: [SluiceModule.forRoot({ limiter: api, limiters: [search] })],
  controllers: [AppController],
  // Every route, unless its controller or itself says otherwise.
  providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
})
class AppModule {}

const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
const port = Number(process.env.PORT ?? 3000);
await app.listen(port, '127.0.0.1');
console.log(`listening on http://127.0.0.1:${port}`);
