// Adapter for Express 4 and 5: a RequestHandler. Imports Express's types only, never its runtime.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { invalidOption } from '../../errors.js';
import { type KeyControls, keyControls } from '../controls.js';
import { type DenialInfo, evaluate, infoOn } from '../handle.js';
import type { RateLimitInfo } from '../info.js';
import { applyToNodeResponse } from '../node-response.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from '../options.js';
import { nodeShedMiddleware, resolveShedOptions, type ShedOptions } from '../shed.js';
import { nodeRequestView, type RequestView } from '../view.js';

export { type ClientIpOptions, clientIp, headerKey } from '../client-key.js';
export type { DenialInfo } from '../handle.js';
export type { RateLimitInfo } from '../info.js';
export { bodyBytes } from '../settle.js';
export { type ShedOptions, type ShedRefusal, shedRefusal } from '../shed.js';

declare global {
  // Express's own way to extend its Request: importing sluice/express types `req.rateLimit`.
  namespace Express {
    interface Request {
      /**
       * What sluice decided for this request, set by `rateLimit()` from `sluice/express` under the
       * default `requestPropertyName`; `undefined` when no limiter decided it.
       */
      rateLimit?: RateLimitInfo | undefined;
    }
  }
}

/** Options of the Express middleware. */
export interface ExpressRateLimitOptions extends RateLimitOptions<Request, Response> {
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
  /**
   * Where the handler finds the decision: `req[name]` and `res.locals[name]`; `false` sets
   * neither (`limiter.info(req)` still answers). Only the default name is typed on `req`.
   * @default 'rateLimit'
   */
  readonly requestPropertyName?: string | false;
}

/** The Express middleware, with the decision and the client's key at hand. */
export interface ExpressRateLimiter extends RequestHandler, KeyControls<[req: Request]> {
  /** The decision taken on `req` so far by every sluice middleware; `undefined` before any. */
  info(req: Request): RateLimitInfo | undefined;
}

function viewOf(req: Request): RequestView {
  // originalUrl: inside a mounted router `req.url` is relative to the mount point.
  return nodeRequestView({
    method: req.method,
    url: req.originalUrl,
    headers: req.headers,
    socket: req.socket,
  });
}

/**
 * Rate limits an Express app, router or route. Errors (a store failure the limiter does not
 * absorb, a throwing `key` or `cost` function) go to `next(error)`. The handler finds the decision
 * on `req.rateLimit` (and `res.locals.rateLimit`).
 *
 * Keys come from `req.socket.remoteAddress` and the proxy rules of `clientIp()`: Express's own
 * `trust proxy` setting is not consulted, so there is one set of rules to review. No proxy is
 * trusted by default; behind one, pass `key: clientIp({ trustProxy: 1 })`.
 *
 * @example
 * import express from 'express';
 * import { rateLimit } from 'sluice/express';
 * const app = express();
 * app.use(rateLimit({ limiter }));
 * app.get('/quota', (req, res) => res.json({ remaining: req.rateLimit?.remaining }));
 */
export function rateLimit(options: ExpressRateLimitOptions): ExpressRateLimiter {
  const config = resolveRateLimitOptions<Request, Response>('rateLimit (express)', options, [
    'onDenied',
    'requestPropertyName',
  ]);
  const onDenied = adapterFunction('onDenied', options.onDenied);
  const property = options.requestPropertyName ?? 'rateLimit';
  if (property !== false && (typeof property !== 'string' || property === '')) {
    throw invalidOption('requestPropertyName', 'a property name, or false', property);
  }
  const middleware: RequestHandler = (req, res, next) => {
    const handler =
      onDenied === undefined
        ? undefined
        : (request: Request, response: Response, info: DenialInfo) => onDenied(request, response, next, info);
    evaluate(config, req, viewOf(req), req)
      .then((evaluation) => {
        if (evaluation.kind === 'allow' && property !== false) {
          Reflect.set(req, property, evaluation.info);
          res.locals[property] = evaluation.info;
        }
        return applyToNodeResponse(evaluation, req, res, handler);
      })
      .then(
        (proceed) => {
          if (proceed) next();
        },
        (error: unknown) => next(error),
      );
  };
  const controls = keyControls(config, (req: Request) => ({ request: req, view: viewOf(req) }));
  return Object.assign(middleware, controls, { info: (req: Request) => infoOn(req) });
}

/**
 * Sheds load in front of an Express app or route: each request takes a ticket of `shedder` (of the
 * class `priority` names) and gives it back when its response ends (a 5xx, or a client that went
 * away, counted as dropped). A refused request gets 503 with `Retry-After` and a problem body of
 * type temporary-reduced-capacity. Mount it after `rateLimit` so that a rate-limited request takes
 * no ticket (see docs/shedding.md for the order).
 *
 * @example
 * import { createShedder } from 'sluice/shed';
 * import { shed } from 'sluice/express';
 * const shedder = createShedder();
 * app.use(shed({ shedder, priority: (req) => (req.path.startsWith('/checkout') ? 'critical' : 'default') }));
 */
export function shed(options: ShedOptions<Request>): RequestHandler {
  return nodeShedMiddleware<Request, Response>(resolveShedOptions('shed (express)', options));
}
