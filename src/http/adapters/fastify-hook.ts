// The Fastify hook: one request through the limiters, the decision on `request.rateLimit`. Imports Fastify's types only.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type KeyControls, keyControls } from '../controls.js';
import { type DenialInfo, denialInfo, evaluate, infoOn } from '../handle.js';
import type { RateLimitInfo } from '../info.js';
import { finishOnEnd, withoutContentType } from '../node-response.js';
import { adapterFunction, type RateLimitOptions, resolveRateLimitOptions } from '../options.js';
import { nodeRequestView, type RequestView } from '../view.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** What sluice decided for this request; `undefined` when no limiter decided it. */
    rateLimit?: RateLimitInfo | undefined;
  }
}

/** Options of the Fastify hook. */
export interface FastifyRateLimitOptions extends RateLimitOptions<FastifyRequest, FastifyReply> {
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

/** An async hook (onRequest, preValidation, preHandler); it resolves to the reply when it has answered (Fastify's convention). */
export interface FastifyRateLimitHook extends KeyControls<[request: FastifyRequest]> {
  (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined>;
  /** The decision taken on `request` so far; `undefined` before any. */
  info(request: FastifyRequest): RateLimitInfo | undefined;
}

/** The adapter's own options, beside {@link RateLimitOptions}. */
const FASTIFY_OPTION_KEYS = ['onDenied'] as const;

function viewOf(request: FastifyRequest): RequestView {
  const raw = request.raw;
  return nodeRequestView({ method: raw.method, url: raw.url, headers: raw.headers, socket: raw.socket });
}

/**
 * Rate limits a Fastify app (as a global hook) or a route (in its `onRequest` or `preHandler`
 * option); the plugin {@link rateLimitPlugin} adds per-route configuration. The handler finds the
 * decision on `request.rateLimit`. Errors (a store failure the limiter does not absorb, a throwing
 * `key` or `cost`) go to Fastify's error handler.
 *
 * @example
 * import Fastify from 'fastify';
 * import { rateLimit } from 'sluice/fastify';
 * const app = Fastify();
 * app.addHook('onRequest', rateLimit({ limiter }));
 * app.post('/login', { onRequest: rateLimit({ limiter: loginLimiter, count: 'failed' }) }, login);
 */
export function rateLimit(options: FastifyRateLimitOptions): FastifyRateLimitHook {
  const config = resolveRateLimitOptions<FastifyRequest, FastifyReply>(
    'rateLimit (fastify)',
    options,
    FASTIFY_OPTION_KEYS,
  );
  const onDenied = adapterFunction('onDenied', options.onDenied);
  const hook = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const raw = request.raw;
    const evaluation = await evaluate(config, request, viewOf(request), raw);
    if (evaluation.kind === 'skip') return undefined;
    if (evaluation.kind === 'allow') {
      request.rateLimit = evaluation.info;
      reply.headers(evaluation.headers);
      finishOnEnd(reply.raw, evaluation, reply);
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
  const controls = keyControls(config, (request: FastifyRequest) => ({ request, view: viewOf(request) }));
  return Object.assign(hook, controls, { info: (request: FastifyRequest) => infoOn(request.raw) });
}
