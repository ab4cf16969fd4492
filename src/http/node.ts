// Adapter for Node's own http server (and the shared writers Express reuses). Imports only node:http types.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type DenialInfo, denialInfo, type Evaluation, evaluate } from './handle.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from './options.js';
import type { Refusal } from './problem.js';
import { nodeRequestView, type RequestView } from './view.js';

export { type ClientIpOptions, clientIp, headerKey } from './client-key.js';
export type { DenialInfo } from './handle.js';

/** Options of the node:http adapter. */
export interface NodeRateLimitOptions extends RateLimitOptions<IncomingMessage> {
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
export interface NodeRateLimiter {
  /** Resolves `true` when the request may go on (headers set), `false` when it has been answered. */
  (request: IncomingMessage, response: ServerResponse): Promise<boolean>;
  /** A request listener that runs the guard, then `listener`. Errors answer 500. */
  wrap(
    listener: (request: IncomingMessage, response: ServerResponse) => unknown,
  ): (request: IncomingMessage, response: ServerResponse) => void;
}

/** Sets each header on a Node response (replacing what an earlier limiter wrote: it re-renders all items). */
export function setNodeHeaders(response: ServerResponse, headers: Record<string, string>): void {
  if (response.headersSent) return;
  for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
}

/** The refusal's headers minus its Content-Type, for a denial handler that sends its own body. */
export function withoutContentType(headers: Record<string, string>): Record<string, string> {
  const { 'Content-Type': _contentType, ...rest } = headers;
  return rest;
}

/** Sends the default refusal: status, headers, problem+json body. */
export function sendNodeRefusal(response: ServerResponse, refusal: Refusal): void {
  if (response.headersSent) {
    response.end();
    return;
  }
  response.statusCode = refusal.status;
  setNodeHeaders(response, refusal.headers);
  response.setHeader('Content-Length', Buffer.byteLength(refusal.body));
  response.end(refusal.body);
}

/** Calls `settle` once the response finished, or closed before finishing (counted as failed). */
export function settleOnFinish(
  response: ServerResponse,
  settle: ((status: number, finished: boolean) => void) | undefined,
): void {
  if (settle === undefined) return;
  response.once('finish', () => settle(response.statusCode, true));
  response.once('close', () => settle(response.statusCode, response.writableFinished));
}

/** Applies an evaluation to a Node response; `true` when the request may go on. */
export async function applyToNodeResponse<Req, Res extends ServerResponse>(
  evaluation: Evaluation,
  request: Req,
  response: Res,
  onDenied: ((request: Req, response: Res, info: DenialInfo) => void | Promise<void>) | undefined,
): Promise<boolean> {
  if (evaluation.kind === 'skip') return true;
  if (evaluation.kind === 'allow') {
    setNodeHeaders(response, evaluation.headers);
    settleOnFinish(response, evaluation.settle);
    return true;
  }
  if (onDenied === undefined) {
    sendNodeRefusal(response, evaluation.refusal);
    return false;
  }
  response.statusCode = evaluation.refusal.status;
  setNodeHeaders(response, withoutContentType(evaluation.refusal.headers));
  await onDenied(request, response, denialInfo(evaluation));
  return false;
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
 * createServer(limit.wrap((req, res) => res.end('ok'))).listen(3000);
 * // or, inside your own listener: if (!(await limit(req, res))) return;
 */
export function rateLimit(options: NodeRateLimitOptions): NodeRateLimiter {
  const config = resolveRateLimitOptions<IncomingMessage>('rateLimit (node)', options, [
    'onDenied',
    'onError',
  ]);
  const onDenied = adapterFunction('onDenied', options.onDenied);
  const onError = adapterFunction('onError', options.onError) ?? answer500;
  const guard = async (request: IncomingMessage, response: ServerResponse): Promise<boolean> => {
    const view: RequestView = nodeRequestView(request);
    const evaluation = await evaluate(config, request, view, request);
    return applyToNodeResponse(evaluation, request, response, onDenied);
  };
  const wrap: NodeRateLimiter['wrap'] = (listener) => (request, response) => {
    guard(request, response)
      .then((proceed) => (proceed ? listener(request, response) : undefined))
      .catch((error: unknown) => onError(error, request, response));
  };
  return Object.assign(guard, { wrap });
}
