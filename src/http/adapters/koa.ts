// Adapter for Koa 2 and 3: a middleware, the decision on `ctx.state.rateLimit`. Imports Koa's types only, never its runtime.
import type { Context, Next } from 'koa';
import { type KeyControls, keyControls } from '../controls.js';
import { type DenialInfo, denialInfo, evaluate, infoOn } from '../handle.js';
import type { RateLimitInfo } from '../info.js';
import { finishOnEnd, withoutContentType } from '../node-response.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from '../options.js';
import { nodeShed, resolveShedOptions, type ShedOptions } from '../shed.js';
import { nodeRequestView, type RequestView } from '../view.js';

export { type ClientIpOptions, clientIp, headerKey } from '../client-key.js';
export type { DenialInfo } from '../handle.js';
export type { RateLimitInfo } from '../info.js';
export { bodyBytes } from '../settle.js';
export { type ShedOptions, type ShedRefusal, shedRefusal } from '../shed.js';

declare module 'koa' {
  // Koa's own way to type `ctx.state`: importing sluice/koa types `ctx.state.rateLimit`.
  interface DefaultState {
    /** What sluice decided for this request, set by `rateLimit()` from `sluice/koa`; `undefined` when no limiter decided it. */
    rateLimit?: RateLimitInfo | undefined;
  }
}

/** Options of the Koa middleware. */
export interface KoaRateLimitOptions extends RateLimitOptions<Context, Context> {
  /**
   * Answers a refused request instead of the default problem+json response: set `ctx.body` (and
   * `ctx.type`). The status and headers (Retry-After, RateLimit...) are already set on `ctx`.
   */
  readonly onDenied?: (ctx: Context, info: DenialInfo) => void | Promise<void>;
}

/** The Koa middleware, with the decision and the client's key at hand. */
export interface KoaRateLimiter extends KeyControls<[ctx: Context]> {
  (ctx: Context, next: Next): Promise<void>;
  /** The decision taken on this request so far by every sluice middleware; `undefined` before any. */
  info(ctx: Context): RateLimitInfo | undefined;
}

function viewOf(ctx: Context): RequestView {
  // originalUrl: a mounted app (koa-mount) sees `ctx.url` relative to its mount point.
  const { req } = ctx;
  return nodeRequestView({
    method: ctx.method,
    url: ctx.originalUrl,
    headers: req.headers,
    socket: req.socket,
  });
}

/**
 * Rate limits a Koa app or router. The handler finds the decision on `ctx.state.rateLimit`. Errors
 * (a store failure the limiter does not absorb, a throwing `key` or `cost`) are thrown to the
 * middlewares before it and Koa's error handling.
 *
 * Keys come from the socket's address and the proxy rules of `clientIp()`: Koa's own `app.proxy`
 * setting is not consulted, so there is one set of rules to review. No proxy is trusted by
 * default; behind one, pass `key: clientIp({ trustProxy: 1 })`.
 *
 * @example
 * import Koa from 'koa';
 * import { rateLimit } from 'sluice/koa';
 * const app = new Koa();
 * app.use(rateLimit({ limiter }));
 * app.use((ctx) => {
 *   ctx.body = { remaining: ctx.state.rateLimit?.remaining };
 * });
 */
export function rateLimit(options: KoaRateLimitOptions): KoaRateLimiter {
  const config = resolveRateLimitOptions<Context, Context>('rateLimit (koa)', options, ['onDenied']);
  const onDenied = adapterFunction('onDenied', options.onDenied);
  const middleware = async (ctx: Context, next: Next): Promise<void> => {
    // Keyed on the Node request: stacked sluice middlewares (and Koa's routers) see one set of decisions.
    const evaluation = await evaluate(config, ctx, viewOf(ctx), ctx.req);
    if (evaluation.kind === 'skip') {
      await next();
      return;
    }
    if (evaluation.kind === 'allow') {
      ctx.state.rateLimit = evaluation.info;
      ctx.set(evaluation.headers);
      finishOnEnd(ctx.res, evaluation, ctx);
      await next();
      return;
    }
    const { refusal } = evaluation;
    ctx.status = refusal.status;
    if (onDenied === undefined) {
      // The Content-Type goes first: Koa keeps a type already set when the body is assigned.
      ctx.set(refusal.headers);
      ctx.body = refusal.body;
      return;
    }
    ctx.set(withoutContentType(refusal.headers));
    await onDenied(ctx, denialInfo(evaluation));
  };
  const controls = keyControls(config, (ctx: Context) => ({ request: ctx, view: viewOf(ctx) }));
  return Object.assign(middleware, controls, { info: (ctx: Context) => infoOn(ctx.req) });
}

/**
 * Sheds load in front of a Koa app or router: each request takes a ticket of `shedder` and gives it
 * back when its response ends (a 5xx, or a client that went away, counted as dropped); a refused
 * one gets 503 with `Retry-After` and a problem body of type temporary-reduced-capacity.
 *
 * @example
 * import { createShedder } from 'sluice/shed';
 * import { shed } from 'sluice/koa';
 * app.use(shed({ shedder: createShedder(), priority: (ctx) => ctx.get('x-priority') || undefined }));
 */
export function shed(options: ShedOptions<Context>): (ctx: Context, next: Next) => Promise<void> {
  const config = resolveShedOptions<Context>('shed (koa)', options);
  return async (ctx, next) => {
    if (await nodeShed(config, ctx, ctx.res)) {
      await next();
      return;
    }
    // The 503 went out on the Node response: Koa must not answer again.
    ctx.respond = false;
  };
}
