// Adapter for Hono 4: a MiddlewareHandler. Imports Hono's types only, never its runtime.
import type { Context, MiddlewareHandler } from 'hono';
import { type DenialInfo, decisionsOn, denialInfo, evaluate } from './handle.js';
import { rateLimitHeaders } from './headers.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from './options.js';
import { fetchRequestView } from './view.js';

export { type ClientIpOptions, clientIp, headerKey } from './client-key.js';
export type { DenialInfo } from './handle.js';

/** Options of the Hono middleware. */
export interface HonoRateLimitOptions extends RateLimitOptions<Context> {
  /**
   * Answers a refused request instead of the default problem+json response. The refusal's
   * headers (Retry-After, RateLimit...) are added to the Response it returns.
   */
  readonly onDenied?: (c: Context, info: DenialInfo) => Response | Promise<Response>;
  /**
   * The peer's address, which web-standard requests do not carry. The default reads the socket
   * that @hono/node-server passes as `c.env.incoming`; on other runtimes pass their connection
   * info (e.g. `getConnInfo(c).remote.address` from the runtime's Hono adapter).
   */
  readonly remoteAddress?: (c: Context) => string | undefined;
}

/** The socket address @hono/node-server exposes in `c.env.incoming`, when present. */
function nodeServerAddress(c: Context): string | undefined {
  const env: unknown = c.env;
  if (typeof env !== 'object' || env === null) return undefined;
  const incoming = (env as { incoming?: { socket?: { remoteAddress?: unknown } } }).incoming;
  const address = incoming?.socket?.remoteAddress;
  return typeof address === 'string' ? address : undefined;
}

/**
 * Rate limits a Hono app or route. Errors (a store failure the limiter does not absorb, a
 * throwing `key` or `cost`) propagate to Hono's `onError`.
 *
 * @example
 * import { Hono } from 'hono';
 * import { headerKey } from 'sluice/http';
 * import { rateLimit } from 'sluice/hono';
 * const app = new Hono();
 * app.use('/api/*', rateLimit({ limiter, key: headerKey('x-api-key') }));
 */
export function rateLimit(options: HonoRateLimitOptions): MiddlewareHandler {
  const config = resolveRateLimitOptions<Context>('rateLimit (hono)', options, ['onDenied', 'remoteAddress']);
  const onDenied = adapterFunction('onDenied', options.onDenied);
  const remoteAddress = adapterFunction('remoteAddress', options.remoteAddress) ?? nodeServerAddress;
  return async (c, next) => {
    const raw = c.req.raw;
    const evaluation = await evaluate(config, c, fetchRequestView(raw, remoteAddress(c)), raw);
    if (evaluation.kind === 'skip') {
      await next();
      return undefined;
    }
    if (evaluation.kind === 'deny') {
      const { refusal } = evaluation;
      if (onDenied === undefined) {
        return new Response(refusal.body, { status: refusal.status, headers: refusal.headers });
      }
      c.res = await onDenied(c, denialInfo(evaluation));
      for (const [name, value] of Object.entries(refusal.headers)) {
        if (name !== 'Content-Type' || !c.res.headers.has(name)) c.header(name, value);
      }
      return c.res;
    }
    await next();
    // Rendered after the handler: limiters further in may have added their own items.
    for (const [name, value] of Object.entries(
      rateLimitHeaders(decisionsOn(raw), { style: config.styles }),
    )) {
      c.header(name, value);
    }
    evaluation.settle?.(c.res.status, true);
    return undefined;
  };
}
