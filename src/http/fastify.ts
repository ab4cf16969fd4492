// Adapter for Fastify 4 and 5: an onRequest hook. Imports Fastify's types only, never its runtime.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type DenialInfo, denialInfo, evaluate } from './handle.js';
import { settleOnFinish, withoutContentType } from './node-response.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from './options.js';
import { nodeRequestView } from './view.js';

export { type ClientIpOptions, clientIp, headerKey } from './client-key.js';
export type { DenialInfo } from './handle.js';

/** Options of the Fastify hook. */
export interface FastifyRateLimitOptions extends RateLimitOptions<FastifyRequest> {
  /**
   * Answers a refused request instead of the default problem+json response. The status and
   * headers (Retry-After, RateLimit...) are already set on `reply`; send something.
   */
  readonly onDenied?: (
    request: FastifyRequest,
    reply: FastifyReply,
    info: DenialInfo,
  ) => void | Promise<void>;
}

/** An async onRequest hook; it resolves to the reply when it has answered (Fastify's convention). */
export type FastifyRateLimitHook = (
  request: FastifyRequest,
  reply: FastifyReply,
) => Promise<FastifyReply | undefined>;

/**
 * Rate limits a Fastify app (as a global hook) or a route (in its `onRequest` option). Errors
 * (a store failure the limiter does not absorb, a throwing `key` or `cost`) go to Fastify's error
 * handler.
 *
 * @example
 * import Fastify from 'fastify';
 * import { rateLimit } from 'sluice/fastify';
 * const app = Fastify();
 * app.addHook('onRequest', rateLimit({ limiter }));
 * app.post('/login', { onRequest: rateLimit({ limiter: loginLimiter, count: 'failed' }) }, login);
 */
export function rateLimit(options: FastifyRateLimitOptions): FastifyRateLimitHook {
  const config = resolveRateLimitOptions<FastifyRequest>('rateLimit (fastify)', options, ['onDenied']);
  const onDenied = adapterFunction('onDenied', options.onDenied);
  return async (request, reply) => {
    const raw = request.raw;
    const view = nodeRequestView({
      method: raw.method,
      url: raw.url,
      headers: raw.headers,
      socket: raw.socket,
    });
    const evaluation = await evaluate(config, request, view, raw);
    if (evaluation.kind === 'skip') return undefined;
    if (evaluation.kind === 'allow') {
      reply.headers(evaluation.headers);
      settleOnFinish(reply.raw, evaluation.settle);
      return undefined;
    }
    const { refusal } = evaluation;
    reply.code(refusal.status);
    if (onDenied === undefined) {
      reply.headers(refusal.headers).send(refusal.body);
      return reply;
    }
    reply.headers(withoutContentType(refusal.headers));
    await onDenied(request, reply, denialInfo(evaluation));
    if (!reply.sent) reply.send();
    return reply;
  };
}
