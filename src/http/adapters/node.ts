// `sluice/node`: the adapter for Node's own http server. Its writers live in node-response.ts, shared with Express and Fastify.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type KeyControls, keyControls } from '../controls.js';
import { type DenialInfo, evaluate, infoOn } from '../handle.js';
import type { RateLimitInfo } from '../info.js';
import { applyToNodeResponse } from '../node-response.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from '../options.js';
import { nodeShed, resolveShedOptions, type ShedOptions } from '../shed.js';
import { nodeRequestView } from '../view.js';

export { type ClientIpOptions, clientIp, headerKey } from '../client-key.js';
export type { DenialInfo } from '../handle.js';
export type { RateLimitInfo } from '../info.js';
export { bodyBytes } from '../settle.js';
export { type ShedOptions, type ShedRefusal, shedRefusal } from '../shed.js';

/** Options of the node:http adapter. */
export interface NodeRateLimitOptions extends RateLimitOptions<IncomingMessage, ServerResponse> {
  /**
   * Answers a refused request instead of the default problem+json response. The status and
   * headers (Retry-After, RateLimit...) are already set on `response` when it is called.
   */
  readonly onDenied?: (
    request: IncomingMessage,
    response: ServerResponse,
    info: DenialInfo,
  ) => void | Promise<void>;
  /**
   * For `wrap`: receives an error of the limiter, of your option functions or of the listener.
   * @default answers 500 (when nothing was sent yet)
   */
  readonly onError?: (error: unknown, request: IncomingMessage, response: ServerResponse) => void;
}

/** The node:http middleware: a guard you await, and `wrap` for a whole request listener. */
export interface NodeRateLimiter extends KeyControls<[request: IncomingMessage]> {
  /** Resolves `true` when the request may go on (headers set), `false` when it has been answered. */
  (request: IncomingMessage, response: ServerResponse): Promise<boolean>;
  /**
   * A request listener that runs the guard, then `listener` with the decision (`undefined` for a
   * request no limiter decided). Errors answer 500.
   */
  wrap(
    listener: (
      request: IncomingMessage,
      response: ServerResponse,
      info: RateLimitInfo | undefined,
    ) => unknown,
  ): (request: IncomingMessage, response: ServerResponse) => void;
  /** The decision taken on `request` so far; `undefined` before any. */
  info(request: IncomingMessage): RateLimitInfo | undefined;
}

function answer500(_error: unknown, _request: IncomingMessage, response: ServerResponse): void {
  if (!response.headersSent) {
    response.statusCode = 500;
    response.setHeader('Content-Type', 'text/plain; charset=utf-8');
  }
  response.end('Internal Server Error');
}

/**
 * Rate limits a node:http server.
 *
 * @example
 * import { createServer } from 'node:http';
 * import { rateLimit } from 'sluice/node';
 * const limit = rateLimit({ limiter });
 * createServer(limit.wrap((req, res, info) => res.end(`${info?.remaining} left`))).listen(3000);
 * // or, inside your own listener: if (!(await limit(req, res))) return; then limit.info(req)
 */
export function rateLimit(options: NodeRateLimitOptions): NodeRateLimiter {
  const config = resolveRateLimitOptions<IncomingMessage, ServerResponse>('rateLimit (node)', options, [
    'onDenied',
    'onError',
  ]);
  const onDenied = adapterFunction('onDenied', options.onDenied);
  const onError = adapterFunction('onError', options.onError) ?? answer500;
  const guard = async (request: IncomingMessage, response: ServerResponse): Promise<boolean> => {
    const evaluation = await evaluate(config, request, nodeRequestView(request), request);
    return applyToNodeResponse(evaluation, request, response, onDenied);
  };
  const wrap: NodeRateLimiter['wrap'] = (listener) => (request, response) => {
    guard(request, response)
      .then((proceed) => (proceed ? listener(request, response, infoOn(request)) : undefined))
      .catch((error: unknown) => onError(error, request, response));
  };
  const controls = keyControls(config, (request: IncomingMessage) => ({
    request,
    view: nodeRequestView(request),
  }));
  return Object.assign(guard, controls, { wrap, info: (request: IncomingMessage) => infoOn(request) });
}

/** The node:http shed guard: resolves `true` when the request holds a ticket, `false` when it was answered 503. */
export interface NodeShedder {
  (request: IncomingMessage, response: ServerResponse): Promise<boolean>;
  /** A request listener that runs the guard, then `listener`; errors answer 500. */
  wrap(
    listener: (request: IncomingMessage, response: ServerResponse) => unknown,
  ): (request: IncomingMessage, response: ServerResponse) => void;
}

/**
 * Sheds load in front of a node:http server: each request takes a ticket of `shedder` and gives it
 * back when its response ends (a 5xx, or a client that went away, counted as dropped); a refused
 * one gets 503 with `Retry-After` and a problem body of type temporary-reduced-capacity.
 *
 * @example
 * import { createServer } from 'node:http';
 * import { createShedder } from 'sluice/shed';
 * import { shed } from 'sluice/node';
 * const guard = shed({ shedder: createShedder() });
 * createServer(guard.wrap((req, res) => res.end('ok'))).listen(3000);
 */
export function shed(options: ShedOptions<IncomingMessage>): NodeShedder {
  const config = resolveShedOptions<IncomingMessage>('shed (node)', options);
  const guard = async (request: IncomingMessage, response: ServerResponse): Promise<boolean> =>
    nodeShed(config, request, response);
  const wrap: NodeShedder['wrap'] = (listener) => (request, response) => {
    guard(request, response)
      .then((proceed) => (proceed ? listener(request, response) : undefined))
      .catch((error: unknown) => answer500(error, request, response));
  };
  return Object.assign(guard, { wrap });
}
