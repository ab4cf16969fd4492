// The conformance app on Koa, driven in-process with supertest (from 127.0.0.1), routed by a last middleware.
import { Readable } from 'node:stream';
import Koa, { type Context } from 'koa';
import { type KoaRateLimitOptions, rateLimit } from '../../../../src/http/adapters/koa.js';
import type { Build } from '../conformance.js';
import { describeInfo } from '../support.js';
import { commonOptions, errorCode, STREAMED, supertestSend } from './common.js';

export const buildKoa: Build = async (scenario) => {
  const app = new Koa();
  const options: KoaRateLimitOptions = {
    ...commonOptions<Context>(
      scenario,
      (ctx, name) => ctx.get(name) || undefined,
      (ctx) => ctx.path,
    ),
    ...(scenario.customDenial === true
      ? {
          onDenied: (ctx: Context) => {
            ctx.type = 'text/plain';
            ctx.body = 'slow down';
          },
        }
      : {}),
  };
  const limiter = rateLimit(options);
  // Koa's way to answer errors: a middleware in front of the others.
  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      ctx.status = 500;
      ctx.body = errorCode(error);
    }
  });
  app.use(limiter);
  app.use(async (ctx) => {
    switch (ctx.path) {
      case '/fail':
        ctx.status = 401;
        ctx.body = 'no';
        return;
      case '/health':
        ctx.body = 'up';
        return;
      case '/stream':
        ctx.type = 'text/plain';
        ctx.body = Readable.from(STREAMED);
        return;
      case '/info':
        // The decision is typed on ctx.state: no cast.
        ctx.type = 'application/json';
        ctx.body = describeInfo(ctx.state.rateLimit);
        return;
      case '/admin/key':
        ctx.body = (await limiter.clientKey(ctx)) ?? '(none)';
        return;
      case '/admin/reset':
        await limiter.resetKey(ctx);
        ctx.body = 'reset';
        return;
      default:
        ctx.body = 'ok';
    }
  });
  return {
    key: '127.0.0.1',
    send: supertestSend(app.callback()),
    close: async () => {},
  };
};
