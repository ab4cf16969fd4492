// Nest: per-route limits (module, controller, route), skipped routes, the decision in the handler, the guard per
// controller, forRootAsync, and bad settings failing the start; each on Express and on Fastify, over HTTP.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { Controller, Get, Inject, Injectable, Module, Post, Req, type Type, UseGuards } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import request from 'supertest';
import {
  type NestHttpRequest,
  RateLimit,
  RateLimitDecision,
  type RateLimitInfo,
  SkipRateLimit,
  SluiceGuard,
  SluiceModule,
} from '../../../src/http/adapters/nestjs.js';
import { type Limiter, SluiceError } from '../../../src/index.js';
import { PLATFORMS, type Running, start } from '../../helpers/http/nestjs.js';
import { header, limiterPool, policyItem, rateLimitItem, SECONDS_LEFT } from '../../helpers/http/support.js';

/** Statuses of `times` GETs (or POSTs) in a row. */
async function statuses(url: string, times: number, method: 'get' | 'post' = 'get'): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < times; i++) seen.push((await request(url)[method]('')).status);
  return seen;
}

for (const platform of PLATFORMS) {
  describe(`nestjs (${platform}): routes, decorators and module`, () => {
    const { limiterOf, closeAll } = limiterPool();
    const running: Running[] = [];
    const startApp = async (root: Type): Promise<Running> => {
      const app = await start(platform, root);
      running.push(app);
      return app;
    };
    afterEach(async () => {
      for (const app of running.splice(0)) await app.close();
      closeAll();
    });

    it('a route’s options override its controller’s, which override the module’s; skipped routes are not limited', async () => {
      const api = limiterOf(5, 'api');
      const search = limiterOf(3, 'search');

      @Controller('items')
      class ItemsController {
        @Get()
        list(): string {
          return 'items';
        }

        @Get('health')
        @SkipRateLimit()
        health(): string {
          return 'up';
        }
      }

      @Controller('search')
      @RateLimit('search')
      class SearchController {
        @Get()
        find(): string {
          return 'found';
        }

        @Post('export')
        @RateLimit({ limit: 1 })
        exportAll(): string {
          return 'csv';
        }
      }

      @Controller('internal')
      @SkipRateLimit()
      class InternalController {
        @Get('free')
        free(): string {
          return 'free';
        }

        @Get('metered')
        @RateLimit('api')
        metered(): string {
          return 'metered';
        }
      }

      @Module({
        imports: [SluiceModule.forRoot({ limiter: api, limiters: [api, search] })],
        controllers: [ItemsController, SearchController, InternalController],
        providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
      })
      class AppModule {}

      const { url } = await startApp(AppModule);
      const items = await request(url).get('/items');
      assert.deepEqual(policyItem(items.headers, 'api'), { q: 5, w: 60 }, 'the module’s limiter');
      assert.deepEqual(rateLimitItem(items.headers, 'api'), { r: 4, t: SECONDS_LEFT });
      const found = await request(url).get('/search');
      assert.deepEqual(policyItem(found.headers, 'search'), { q: 3, w: 60 }, 'the controller’s, by name');
      assert.equal(header(found.headers, 'ratelimit')?.includes('"api"'), false, 'instead of the module’s');
      const exported = await request(url).post('/search/export');
      assert.deepEqual(
        policyItem(exported.headers, 'search'),
        { q: 1, w: 60 },
        'the route’s limit over the controller’s limiter',
      );
      assert.deepEqual(await statuses(`${url}/search/export`, 1, 'post'), [429]);
      const health = await statuses(`${url}/items/health`, 8);
      assert.deepEqual(health, Array(8).fill(200), 'a skipped route');
      assert.equal((await request(url).get('/items/health')).headers.ratelimit, undefined);
      assert.deepEqual(await statuses(`${url}/internal/free`, 8), Array(8).fill(200), 'a skipped controller');
      const metered = await request(url).get('/internal/metered');
      assert.deepEqual(
        rateLimitItem(metered.headers, 'api'),
        { r: 3, t: SECONDS_LEFT },
        'a route of a skipped controller limited by its own @RateLimit, sharing the api quota',
      );
      assert.equal((await api.peek('127.0.0.1')).remaining, 3);
    });

    it('the decision in the handler: @RateLimitDecision(), request.rateLimit, and a refusal through Nest’s filter', async () => {
      @Controller()
      class QuotaController {
        @Get('quota')
        quota(
          @RateLimitDecision() decision: RateLimitInfo | undefined,
          @Req() req: NestHttpRequest & { rateLimit?: RateLimitInfo },
        ): object {
          return { remaining: decision?.remaining, key: decision?.key, same: req.rateLimit === decision };
        }

        @Get('free')
        @SkipRateLimit()
        free(@RateLimitDecision() decision: RateLimitInfo | undefined): string {
          return decision === undefined ? 'undecided' : 'decided';
        }
      }

      @Module({
        imports: [SluiceModule.forRoot({ limiter: limiterOf(2, 'quota') })],
        controllers: [QuotaController],
        providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
      })
      class AppModule {}

      const { url } = await startApp(AppModule);
      assert.deepEqual((await request(url).get('/quota')).body, {
        remaining: 1,
        key: '127.0.0.1',
        same: true,
      });
      assert.deepEqual((await request(url).get('/quota')).body, {
        remaining: 0,
        key: '127.0.0.1',
        same: true,
      });
      const refused = await request(url).get('/quota');
      assert.equal(refused.status, 429);
      assert.match(refused.headers['content-type'] ?? '', /^application\/problem\+json/);
      assert.equal(refused.headers['retry-after'], String(SECONDS_LEFT));
      assert.deepEqual(refused.body['violated-policies'], ['quota']);
      assert.equal((await request(url).get('/free')).text, 'undecided');
    });

    it('@UseGuards(SluiceGuard) limits one controller; the other, unguarded, is not limited', async () => {
      @Controller('guarded')
      @UseGuards(SluiceGuard)
      class GuardedController {
        @Get()
        get(): string {
          return 'guarded';
        }
      }

      @Controller('open')
      class OpenController {
        @Get()
        get(): string {
          return 'open';
        }
      }

      @Module({
        imports: [SluiceModule.forRoot({ limiter: limiterOf(1, 'guarded') })],
        controllers: [GuardedController, OpenController],
      })
      class AppModule {}

      const { url } = await startApp(AppModule);
      assert.deepEqual(await statuses(`${url}/guarded`, 2), [200, 429]);
      assert.deepEqual(await statuses(`${url}/open`, 3), [200, 200, 200]);
    });

    it('forRootAsync: options from a factory, with a provider of an imported module injected', async () => {
      const LIMITER = Symbol('limiter');
      const made = limiterOf(2, 'async');

      @Injectable()
      class Plans {
        constructor(@Inject(LIMITER) readonly limiter: Limiter) {}
        limitOf(req: NestHttpRequest): number {
          return req.headers['x-plan'] === 'pro' ? 2 : 1;
        }
      }

      @Module({ providers: [{ provide: LIMITER, useValue: made }, Plans], exports: [Plans] })
      class PlansModule {}

      @Controller()
      class AppController {
        @Get()
        get(): string {
          return 'ok';
        }
      }

      @Module({
        imports: [
          SluiceModule.forRootAsync({
            imports: [PlansModule],
            inject: [Plans],
            useFactory: async (plans: Plans) => ({
              limiter: plans.limiter,
              limit: (req: NestHttpRequest) => plans.limitOf(req),
            }),
          }),
        ],
        controllers: [AppController],
        providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
      })
      class AppModule {}

      const { url } = await startApp(AppModule);
      const first = await request(url).get('/');
      assert.deepEqual(policyItem(first.headers, 'async'), { q: 1, w: 60 });
      assert.equal((await request(url).get('/')).status, 429);
      const pro = await request(url).get('/').set('x-plan', 'pro');
      assert.equal(pro.status, 200, 'a larger quota from the injected provider');
      assert.deepEqual(policyItem(pro.headers, 'async'), { q: 2, w: 60 });
    });

    it('bad settings fail the start, naming the route and the option', async () => {
      const limiter = limiterOf(1, 'api');

      @Controller('bad')
      class BadController {
        @Get()
        @RateLimit('nowhere')
        get(): string {
          return 'never';
        }
      }

      @Module({
        imports: [SluiceModule.forRoot({ limiter, limiters: [limiter] })],
        controllers: [BadController],
      })
      class UnknownName {}

      await assert.rejects(
        start(platform, UnknownName),
        (error: unknown) =>
          error instanceof SluiceError &&
          error.message.startsWith('@RateLimit of BadController.get: Expected `limiter`') &&
          error.message.includes("'api'"),
      );

      @Controller('worse')
      @RateLimit({ cost: -1 })
      class WorseController {
        @Get()
        get(): string {
          return 'never';
        }
      }

      @Module({ imports: [SluiceModule.forRoot({ limiter })], controllers: [WorseController] })
      class BadCost {}

      await assert.rejects(
        start(platform, BadCost),
        (error: unknown) =>
          error instanceof SluiceError &&
          /^@RateLimit of WorseController: Expected `cost`/.test(error.message),
      );
      assert.throws(
        () => RateLimit(3 as never),
        (error: unknown) => error instanceof SluiceError && /`@RateLimit`/.test(error.message),
      );
    });
  });
}
