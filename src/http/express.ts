// Adapter for Express 4 and 5: a RequestHandler. Imports Express's types only, never its runtime.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { type DenialInfo, evaluate } from './handle.js';
import { applyToNodeResponse } from './node-response.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from './options.js';
import { nodeRequestView } from './view.js';

export { type ClientIpOptions, clientIp, headerKey } from './client-key.js';
export type { DenialInfo } from './handle.js';

/** Options of the Express middleware. */
export interface ExpressRateLimitOptions extends RateLimitOptions<Request> {
  /**
   * Answers a refused request instead of the default problem+json response. The status and
   * headers (Retry-After, RateLimit...) are already set on `res` when it is called.
   */
  readonly onDenied?: (
    req: Request,
    res: Response,
    next: NextFunction,
    info: DenialInfo,
  ) => void | Promise<void>;
}

/**
 * Rate limits an Express app, router or route. Errors (a store failure the limiter does not
 * absorb, a throwing `key` or `cost` function) go to `next(error)`.
 *
 * Keys come from `req.socket.remoteAddress` and the proxy rules of `clientIp()`: Express's own
 * `trust proxy` setting is not consulted, so there is one set of rules to review.
 *
 * @example
 * import express from 'express';
 * import { rateLimit } from 'sluice/express';
 * const app = express();
 * app.use(rateLimit({ limiter, key: clientIp({ trustProxy: 1 }) }));
 * app.post('/login', rateLimit({ limiter: loginLimiter, count: 'failed' }), login);
 */
export function rateLimit(options: ExpressRateLimitOptions): RequestHandler {
  const config = resolveRateLimitOptions<Request>('rateLimit (express)', options, ['onDenied']);
  const onDenied = adapterFunction('onDenied', options.onDenied);
  return (req, res, next) => {
    // originalUrl: inside a mounted router `req.url` is relative to the mount point.
    const view = nodeRequestView({
      method: req.method,
      url: req.originalUrl,
      headers: req.headers,
      socket: req.socket,
    });
    const handler =
      onDenied === undefined
        ? undefined
        : (request: Request, response: Response, info: DenialInfo) => onDenied(request, response, next, info);
    evaluate(config, req, view, req)
      .then((evaluation) => applyToNodeResponse(evaluation, req, res, handler))
      .then(
        (proceed) => {
          if (proceed) next();
        },
        (error: unknown) => next(error),
      );
  };
}
