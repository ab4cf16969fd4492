// Nest: a refusal is sent as application/problem+json, as every other adapter sends it, on Express and
// Fastify, and on Express as Nest 11 sends an exception's body (it replaced the type by application/json).
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { Controller, Get, type INestApplication, Module, type Type } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { SluiceGuard, SluiceModule } from '../../../src/http/adapters/nestjs.js';
import { limiterPool } from '../../helpers/http/support.js';

/**
 * Express as Nest 11 (11.2.12, platform-express adapters/express-adapter.js, `reply()`) sends an
 * exception's body: a Content-Type held as a string that does not start with `application/json`
 * becomes `application/json` when the body is an object and the status 400 or more. Nest 12 takes
 * any `+json` type; the rule is replayed here so that the suite, on Nest 12, covers Nest 11 too.
 */
class Nest11Express extends ExpressAdapter {
  override reply(response: unknown, body: unknown, statusCode?: number): unknown {
    const node = response as {
      getHeader(name: string): unknown;
      setHeader(name: string, value: string): void;
    };
    const type = node.getHeader('Content-Type');
    if (
      typeof type === 'string' &&
      !type.startsWith('application/json') &&
      typeof body === 'object' &&
      body !== null &&
      (statusCode ?? 0) >= 400
    ) {
      node.setHeader('Content-Type', 'application/json');
    }
    return super.reply(response, body, statusCode);
  }
}

const ADAPTERS = {
  express: () => new ExpressAdapter(),
  'express as Nest 11 replies': () => new Nest11Express(),
  fastify: () => new FastifyAdapter(),
} as const;

describe('nestjs: the refusal’s Content-Type', () => {
  const { limiterOf, closeAll } = limiterPool();
  const apps: INestApplication[] = [];
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
    closeAll();
  });

  async function refused(adapter: keyof typeof ADAPTERS): Promise<Response> {
    @Controller('hello')
    class HelloController {
      @Get()
      get(): string {
        return 'hello';
      }
    }
    @Module({
      imports: [SluiceModule.forRoot({ limiter: limiterOf(1, 'api') })],
      controllers: [HelloController],
      providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule as Type, ADAPTERS[adapter](), {
      logger: false,
      abortOnError: false,
    });
    apps.push(app);
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as AddressInfo;
    const url = `http://127.0.0.1:${port}/hello`;
    assert.equal((await fetch(url)).status, 200);
    return fetch(url);
  }

  for (const adapter of Object.keys(ADAPTERS) as Array<keyof typeof ADAPTERS>) {
    it(`${adapter}: 429 as application/problem+json, its body the problem`, async () => {
      const response = await refused(adapter);
      assert.equal(response.status, 429);
      assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json(;|$)/);
      const problem = (await response.json()) as { title: string; 'violated-policies': string[] };
      assert.equal(problem.title, 'Too Many Requests');
      assert.deepEqual(problem['violated-policies'], ['api']);
    });
  }
});
