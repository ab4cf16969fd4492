// Adapter for web-standard runtimes: (Request) => Response | undefined, and a wrapper for a whole fetch handler.
import { invalidOption } from '../../errors.js';
import { isKeyExtractor } from '../client-key.js';
import { type KeyControls, keyControls } from '../controls.js';
import { type DenialInfo, decisionsOn, denialInfo, evaluate, infoOn } from '../handle.js';
import { headersIn } from '../headers.js';
import type { RateLimitInfo } from '../info.js';
import {
  adapterFunction,
  type RateLimitOptions,
  type ResolvedOptions,
  resolveRateLimitOptions,
} from '../options.js';
import { type Finished, type SentBody, sentBody, settleOnAbort, trackedResponse } from '../settle.js';
import { admit, resolveShedOptions, type ShedOptions, shedRefusal, WebTicket } from '../shed.js';
import { fetchRequestView, type RequestView } from '../view.js';

export { type ClientIpOptions, clientIp, headerKey } from '../client-key.js';
export type { DenialInfo } from '../handle.js';
export type { RateLimitInfo } from '../info.js';
export { bodyBytes } from '../settle.js';
export { type ShedOptions, type ShedRefusal, shedRefusal } from '../shed.js';

/** Options of the fetch adapter. */
export interface FetchRateLimitOptions extends RateLimitOptions<Request, Response> {
  /** Answers a refused request instead of the default problem+json response; the refusal's headers are added. */
  readonly onDenied?: (request: Request, info: DenialInfo) => Response | Promise<Response>;
  /**
   * The peer's address, which a `Request` does not carry; receives whatever the runtime passes
   * after the request (Deno's `info`, Bun's `server`). Required when keying by address (the
   * default `key`, `clientIp()`): without it every client would share one bucket, so the
   * middleware refuses to be created. A request it gives no address for is an error
   * (ERR_SLUICE_NO_CLIENT_ADDRESS), unless `missingKey: 'deny'` answers it with 400.
   * @example (request, info) => info.remoteAddr.hostname // Deno.serve
   */
  readonly remoteAddress?: (request: Request, ...context: never[]) => string | undefined;
}

/** Your fetch handler: the request, then whatever the runtime passes along (typed as you like). */
export type FetchHandler = (request: Request, ...context: never[]) => Response | Promise<Response>;

/** A handler the runtime can call with any extra arguments (Deno's `info`, Bun's `server`). */
export type WrappedFetchHandler = (request: Request, ...context: unknown[]) => Promise<Response>;

/** The fetch-style limiter. */
export interface FetchRateLimiter extends KeyControls<[request: Request, ...context: unknown[]]> {
  /** A 429 (or configured) Response for a refused request, `undefined` when it may go on. */
  (request: Request, ...context: unknown[]): Promise<Response | undefined>;
  /** The rate-limit headers to add to your response for an allowed request. */
  headers(request: Request): Headers;
  /**
   * With the bare guard: report the response's status once it is known, for a `count` mode, and so
   * that a concurrency limiter's lease is released (else when the client goes away, or it lapses).
   */
  complete(request: Request, status: number): void;
  /**
   * With the bare guard: the response to send for an allowed request, with the rate-limit headers,
   * whose body reports its end (its status for a `count` mode, its bytes and itself for `settle`).
   * `wrap` does this for you.
   */
  respond(request: Request, response: Response): Response;
  /** A whole fetch handler: the guard, your handler, headers on its response, and the count settled. */
  wrap(handler: FetchHandler): WrappedFetchHandler;
  /** The decision taken on `request` so far (in your handler, for "97 calls left"); `undefined` before any. */
  info(request: Request): RateLimitInfo | undefined;
}

/** Copies headers onto a response, recreating it when its headers are immutable (a fetched Response). */
function withHeaders(
  response: Response,
  headers: Record<string, string>,
  keepContentType: boolean,
): Response {
  const entries = Object.entries(headers).filter(([name]) => !(keepContentType && name === 'Content-Type'));
  try {
    for (const [name, value] of entries) response.headers.set(name, value);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    for (const [name, value] of entries) copy.headers.set(name, value);
    return copy;
  }
}

/** The peer's address function, which a fetch limiter keyed by address cannot go without (see `remoteAddress`). */
function addressFunction(
  config: ResolvedOptions<Request>,
  remoteAddress: FetchRateLimitOptions['remoteAddress'],
): FetchRateLimitOptions['remoteAddress'] {
  const checked = adapterFunction('remoteAddress', remoteAddress);
  const needsAddress = isKeyExtractor(config.key) && config.key.needsAddress === true;
  if (checked === undefined && needsAddress && config.missingKey === 'shared') {
    throw invalidOption(
      'remoteAddress',
      "a function returning the client's address (a Request carries none; keyed by address without it, every client would share one bucket), or give a `key` such as headerKey('x-api-key')",
      checked,
    );
  }
  return checked;
}

/** Runs a fetch handler behind the guard: headers on its response, and what is done once it finished. */
function wrapper(
  guard: (request: Request, ...context: unknown[]) => Promise<Response | undefined>,
  respond: (request: Request, response: Response) => Response,
  failed: (request: Request) => void,
): (handler: FetchHandler) => WrappedFetchHandler {
  return (handler) =>
    async (request, ...context) => {
      const refused = await guard(request, ...context);
      if (refused !== undefined) return refused;
      let response: Response;
      try {
        response = await handler(request, ...(context as never[]));
      } catch (error) {
        failed(request);
        throw error;
      }
      return respond(request, response);
    };
}

/** Each allowed request's `finished`, and whether it waits for the body's end (`settle`). */
type Finishers = WeakMap<
  Request,
  { readonly finished: Finished; readonly tracks: boolean; readonly sent: SentBody }
>;

/** A request's view, from the request and whatever the runtime passed after it. */
type ViewOf = (request: Request, context: readonly unknown[]) => RequestView;

/** Builds views, asking `remoteAddress` for the peer's address when one is given. */
function viewFunction(remoteAddress: FetchRateLimitOptions['remoteAddress']): ViewOf {
  // The caller's functions declare what their runtime passes; we forward it untouched.
  return (request, context) =>
    fetchRequestView(
      request,
      remoteAddress === undefined ? undefined : remoteAddress(request, ...(context as never[])),
    );
}

/** The bare guard: `undefined` for a request that may go on (its `finished` kept), else the refusal. */
function guardFunction(
  config: ResolvedOptions<Request>,
  onDenied: FetchRateLimitOptions['onDenied'],
  viewOf: ViewOf,
  finishers: Finishers,
): (request: Request, ...context: unknown[]) => Promise<Response | undefined> {
  return async (request, ...context) => {
    const evaluation = await evaluate(config, request, viewOf(request, context), request);
    if (evaluation.kind === 'skip') return undefined;
    if (evaluation.kind === 'allow') {
      const { finished, countsBytes } = evaluation;
      const sent = sentBody();
      if (finished !== undefined) finishers.set(request, { finished, tracks: countsBytes, sent });
      // A client that goes away before the handler ends frees the request's slots at once.
      settleOnAbort(request.signal, finished, sent);
      return undefined;
    }
    const { refusal } = evaluation;
    if (onDenied === undefined) {
      return new Response(refusal.body, { status: refusal.status, headers: refusal.headers });
    }
    return withHeaders(await onDenied(request, denialInfo(evaluation)), refusal.headers, true);
  };
}

/**
 * Rate limits any runtime built on web standards (Deno, Bun, Cloudflare Workers, Node's fetch
 * servers).
 *
 * @example
 * import { headerKey } from 'sluice/http';
 * import { rateLimit } from 'sluice/fetch';
 * const limit = rateLimit({ limiter, key: headerKey('x-api-key') });
 * export default {
 *   fetch: limit.wrap((request) => new Response(`${limit.info(request)?.remaining} calls left`)),
 * };
 * // or: const refused = await limit(request); if (refused) return refused;
 */
export function rateLimit(options: FetchRateLimitOptions): FetchRateLimiter {
  const config = resolveRateLimitOptions<Request, Response>(
    'rateLimit (fetch)',
    options,
    ['onDenied', 'remoteAddress'],
    { addressRequired: true },
  );
  const onDenied = adapterFunction('onDenied', options.onDenied);
  const remoteAddress = addressFunction(config, options.remoteAddress);
  const finishers: Finishers = new WeakMap();
  const viewOf = viewFunction(remoteAddress);
  const guard = guardFunction(config, onDenied, viewOf, finishers);
  const headersFor = (request: Request): Record<string, string> =>
    headersIn(decisionsOn(request), config.styles);
  /** The request's `finished`, taken once. */
  const finisher = (request: Request) => {
    const found = finishers.get(request);
    finishers.delete(request);
    return found;
  };
  // A count mode needs the status alone; `settle` waits until the body has been read to its end.
  const respond = (request: Request, response: Response): Response => {
    const found = finisher(request);
    const sent = withHeaders(response, headersFor(request), false);
    if (found === undefined) return sent;
    if (found.tracks) return trackedResponse(sent, found.finished, response, found.sent);
    found.finished(response.status, true, response, 0);
    return sent;
  };
  const controls = keyControls(config, (request: Request, ...context: unknown[]) => ({
    request,
    view: viewOf(request, context),
  }));
  return Object.assign(guard, controls, {
    headers: (request: Request) => new Headers(headersFor(request)),
    complete: (request: Request, status: number) => finisher(request)?.finished(status, true, undefined, 0),
    respond,
    wrap: wrapper(guard, respond, (request) => finisher(request)?.finished(500, false, undefined, 0)),
    info: (request: Request) => infoOn(request),
  });
}

/** The fetch-style shed guard. */
export interface FetchShedder {
  /** A 503 Response for a refused request; `undefined` when it holds a ticket (give its response to `respond`). */
  (request: Request): Promise<Response | undefined>;
  /**
   * With the bare guard: the response to send in place of the handler's, whose body's end (its
   * last chunk read, a streamed one included) gives the request's ticket back, a 5xx counted as
   * dropped, a body cancelled or failed too.
   */
  respond(request: Request, response: Response): Response;
  /**
   * With the bare guard: gives the request's ticket back now, with the status of its response (a
   * 5xx counted as dropped), when there is no body to wait for. Without `respond` or `complete`,
   * the ticket comes back when the client goes away.
   */
  complete(request: Request, status: number): void;
  /** A whole fetch handler: the guard, your handler, and the ticket given back at its body's end (dropped if it throws). */
  wrap(handler: FetchHandler): WrappedFetchHandler;
}

/**
 * Sheds load in front of a fetch handler (Deno, Bun, Workers, Node's fetch servers): each request
 * takes a ticket of `shedder` and gives it back when its response's body has ended (a 5xx, a thrown
 * error, a body cancelled or a client that went away, counted as dropped); a refused one gets 503
 * with `Retry-After` and a problem body of type temporary-reduced-capacity.
 *
 * @example
 * import { createShedder } from 'sluice/shed';
 * import { shed } from 'sluice/fetch';
 * const guard = shed({ shedder: createShedder(), priority: (request) => request.headers.get('x-priority') ?? undefined });
 * export default { fetch: guard.wrap((request) => new Response('ok')) };
 */
export function shed(options: ShedOptions<Request>): FetchShedder {
  const config = resolveShedOptions<Request>('shed (fetch)', options);
  const tickets = new WeakMap<Request, WebTicket>();
  const guard = async (request: Request): Promise<Response | undefined> => {
    const admission = await admit(config, request);
    if (!admission.allowed) {
      const refusal = shedRefusal(admission);
      return new Response(refusal.body, { status: refusal.status, headers: refusal.headers });
    }
    tickets.set(request, new WebTicket(admission, request.signal));
    return undefined;
  };
  /** The request's ticket, taken once. */
  const ticketOf = (request: Request): WebTicket | undefined => {
    const ticket = tickets.get(request);
    tickets.delete(request);
    return ticket;
  };
  const respond = (request: Request, response: Response): Response =>
    ticketOf(request)?.respond(response) ?? response;
  const complete = (request: Request, status: number): void => ticketOf(request)?.complete(status);
  const wrap =
    (handler: FetchHandler): WrappedFetchHandler =>
    async (request, ...context) => {
      const refused = await guard(request);
      if (refused !== undefined) return refused;
      let response: Response;
      try {
        response = await handler(request, ...(context as never[]));
      } catch (error) {
        ticketOf(request)?.drop();
        throw error;
      }
      return respond(request, response);
    };
  return Object.assign(guard, { respond, complete, wrap });
}
