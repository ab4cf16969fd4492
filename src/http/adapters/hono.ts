// Adapter for Hono 4: a MiddlewareHandler with typed Variables. Imports Hono's types only, never its runtime.
import type { Context, MiddlewareHandler } from 'hono';
import { invalidOption } from '../../errors.js';
import { type KeyControls, keyControls } from '../controls.js';
import { type DenialInfo, decisionsOn, denialInfo, evaluate, infoOn } from '../handle.js';
import { rateLimitHeaders } from '../headers.js';
import type { RateLimitInfo } from '../info.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from '../options.js';
import { sentBody, settleOnAbort, trackedResponse } from '../settle.js';
import { admit, resolveShedOptions, type ShedOptions, shedRefusal, WebTicket } from '../shed.js';
import { fetchRequestView, type RequestView } from '../view.js';

export { type ClientIpOptions, clientIp, headerKey } from '../client-key.js';
export type { DenialInfo } from '../handle.js';
export type { RateLimitInfo } from '../info.js';
export { bodyBytes } from '../settle.js';
export { type ShedOptions, type ShedRefusal, shedRefusal } from '../shed.js';

/** Options of the Hono middleware. */
export interface HonoRateLimitOptions<Name extends string = 'rateLimit'>
  extends RateLimitOptions<Context, Response> {
  /**
   * Answers a refused request instead of the default problem+json response. The refusal's
   * headers (Retry-After, RateLimit...) are added to the Response it returns.
   */
  readonly onDenied?: (c: Context, info: DenialInfo) => Response | Promise<Response>;
  /**
   * The peer's address, which web-standard requests do not carry. The default reads the socket
   * that @hono/node-server passes as `c.env.incoming`; on other runtimes pass their connection
   * info (e.g. `getConnInfo(c).remote.address` from the runtime's Hono adapter). Keyed by address
   * without one, a request is a configuration error (ERR_SLUICE_NO_CLIENT_ADDRESS), never one
   * bucket shared by every client.
   */
  readonly remoteAddress?: (c: Context) => string | undefined;
  /**
   * The context variable that holds the decision: `c.get('rateLimit')`, typed by the middleware.
   * @default 'rateLimit'
   */
  readonly variable?: Name;
}

/** The variables the middleware sets, for `new Hono<{ Variables: RateLimitVariables }>()`. */
export type RateLimitVariables<Name extends string = 'rateLimit'> = {
  [Key in Name]: RateLimitInfo | undefined;
};

/** The Hono middleware, with the decision and the client's key at hand. */
export interface HonoRateLimiter<Name extends string = 'rateLimit'>
  extends MiddlewareHandler<{ Variables: RateLimitVariables<Name> }>,
    KeyControls<[c: Context]> {
  /** The decision taken on this request so far; `undefined` before any. */
  info(c: Context): RateLimitInfo | undefined;
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
 * Rate limits a Hono app or route. The handler finds the decision with `c.get('rateLimit')`,
 * typed when the middleware is in the route's chain (or declared in the app's Variables). Errors
 * (a store failure the limiter does not absorb, a throwing `key` or `cost`, a runtime without the
 * client's address) propagate to Hono's `onError`.
 *
 * @example
 * import { Hono } from 'hono';
 * import { headerKey } from 'sluice/http';
 * import { rateLimit } from 'sluice/hono';
 * const app = new Hono();
 * app.get('/api/items', rateLimit({ limiter, key: headerKey('x-api-key') }), (c) =>
 *   c.json({ remaining: c.get('rateLimit')?.remaining }),
 * );
 */
export function rateLimit<Name extends string = 'rateLimit'>(
  options: HonoRateLimitOptions<Name>,
): HonoRateLimiter<Name> {
  const config = resolveRateLimitOptions<Context, Response>(
    'rateLimit (hono)',
    options,
    ['onDenied', 'remoteAddress', 'variable'],
    { addressRequired: true },
  );
  const onDenied = adapterFunction('onDenied', options.onDenied);
  const remoteAddress = adapterFunction('remoteAddress', options.remoteAddress) ?? nodeServerAddress;
  // The default applies only when Name is its default, 'rateLimit'.
  const variable = (options.variable ?? 'rateLimit') as Name;
  if (typeof variable !== 'string' || variable === '') {
    throw invalidOption('variable', 'a variable name', variable);
  }
  const viewOf = (c: Context): RequestView => fetchRequestView(c.req.raw, remoteAddress(c));
  const middleware: MiddlewareHandler<{ Variables: RateLimitVariables<Name> }> = async (c, next) => {
    const raw = c.req.raw;
    const evaluation = await evaluate(config, c, viewOf(c), raw);
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
    c.set(variable, evaluation.info);
    // A client that goes away before the handler ends frees the request's slots at once.
    const sent = sentBody();
    settleOnAbort(raw.signal, evaluation.finished, sent);
    await next();
    // Rendered after the handler: limiters further in may have added their own items.
    for (const [name, value] of Object.entries(
      rateLimitHeaders(decisionsOn(raw), { style: config.styles }),
    )) {
      c.header(name, value);
    }
    const { finished } = evaluation;
    // A count mode needs the status alone; `settle` waits until the body has been read to its end
    // (a streamed answer settles after its last event).
    if (finished !== undefined) {
      if (evaluation.countsBytes) c.res = trackedResponse(c.res, finished, c.res, sent);
      else finished(c.res.status, true, c.res, 0);
    }
    return undefined;
  };
  const controls = keyControls(config, (c: Context) => ({ request: c, view: viewOf(c) }));
  return Object.assign(middleware, controls, { info: (c: Context) => infoOn(c.req.raw) });
}

/**
 * Sheds load in front of a Hono app or route: each request takes a ticket of `shedder` and gives it
 * back when its response's body has ended (a 5xx, a thrown error, a body cancelled or a client that
 * went away, counted as dropped); a refused one gets 503 with `Retry-After` and a problem body of
 * type temporary-reduced-capacity.
 *
 * @example
 * import { createShedder } from 'sluice/shed';
 * import { shed } from 'sluice/hono';
 * app.use(shed({ shedder: createShedder(), priority: (c) => c.req.header('x-priority') }));
 */
export function shed(options: ShedOptions<Context>): MiddlewareHandler {
  const config = resolveShedOptions<Context>('shed (hono)', options);
  return async (c, next) => {
    const admission = await admit(config, c);
    if (!admission.allowed) {
      const refusal = shedRefusal(admission);
      return new Response(refusal.body, { status: refusal.status, headers: refusal.headers });
    }
    const ticket = new WebTicket(admission, c.req.raw.signal);
    try {
      await next();
    } catch (error) {
      ticket.drop();
      throw error;
    }
    // Hono turns a handler's error into c.error and a 500 response; release() ignores a second call.
    if (c.error !== undefined) ticket.complete(500);
    // The ticket comes back when the body has been read to its end: a streamed answer holds it.
    else c.res = ticket.respond(c.res);
    return undefined;
  };
}
