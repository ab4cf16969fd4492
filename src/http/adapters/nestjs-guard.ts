// The Nest guard: each HTTP request through the shared path, headers on the platform's reply, a refusal as an HttpException.
import type { ServerResponse } from 'node:http';
import { type CanActivate, type ExecutionContext, HttpException, Inject, Injectable } from '@nestjs/common';
import { type DenialInfo, denialInfo, evaluate } from '../handle.js';
import { finishOnEnd, setNodeHeaders } from '../node-response.js';
import {
  type NestHttpRequest,
  nodeRequestOf,
  type RouteLimits,
  SLUICE_ROUTES,
  viewOf,
} from './nestjs-routes.js';

/**
 * What the guard throws for a refused request: 429 (quota or block), 403 (ban), 503 (a limiter
 * failing closed) or 400 (no client key with `missingKey: 'deny'`), whose response is the problem
 * body. The headers (Retry-After, RateLimit..., Content-Type) are already on the reply: Nest's
 * exception filter sends the body as it is, and a filter of yours (`@Catch(RateLimitException)`)
 * may answer otherwise.
 *
 * @example
 * @Catch(RateLimitException)
 * export class SlowDownFilter implements ExceptionFilter {
 *   catch(exception: RateLimitException, host: ArgumentsHost) {
 *     const reply = host.switchToHttp().getResponse<Response>(); // Express; headers already set
 *     reply.status(exception.getStatus()).json({ error: 'slow_down', key: exception.denial.key });
 *   }
 * }
 */
export class RateLimitException extends HttpException {
  /** The refusal: status, headers, problem body, the client's key and every policy's decision. */
  readonly denial: DenialInfo;

  constructor(denial: DenialInfo) {
    super({ ...denial.problem }, denial.status);
    this.denial = denial;
  }
}

/** Fastify's reply (Nest on @nestjs/platform-fastify), told from Express's response by its `raw`. */
interface FastifyReplyLike {
  readonly raw: ServerResponse;
  headers(values: Record<string, string>): unknown;
}

function isFastifyReply(response: object): response is FastifyReplyLike {
  const reply = response as Partial<FastifyReplyLike>;
  return typeof reply.headers === 'function' && typeof reply.raw === 'object' && reply.raw !== null;
}

/** Sets headers on the platform's reply: Fastify's own, or Express's (a Node response). */
function setHeaders(response: object, headers: Record<string, string>): void {
  if (isFastifyReply(response)) response.headers(headers);
  else setNodeHeaders(response as ServerResponse, headers);
}

/**
 * A refusal's headers on the platform's reply, its `Content-Type` kept through Nest's exception
 * filter. On Express, Nest 11 replaces a `Content-Type` that does not start with `application/json`
 * by `application/json` when it sends an exception's body (`setHeader('Content-Type',
 * 'application/json')`; Nest 12 takes any `+json` type): on this response, that one call is let
 * pass unheard while the refusal's type holds. A filter of yours sets its own with Express's
 * `res.type()` or `res.set()`, or replaces the header with any other value.
 */
function setRefusalHeaders(response: object, headers: Record<string, string>): void {
  setHeaders(response, headers);
  const type = headers['Content-Type'];
  if (type === undefined || isFastifyReply(response)) return;
  const node = response as ServerResponse;
  const setHeader = node.setHeader;
  node.setHeader = function keepProblemType(this: ServerResponse, name, value) {
    if (
      value === 'application/json' &&
      name.toLowerCase() === 'content-type' &&
      this.getHeader('Content-Type') === type
    ) {
      node.setHeader = setHeader;
      return this;
    }
    return setHeader.call(this, name, value);
  };
}

function nodeResponseOf(response: object): ServerResponse {
  return isFastifyReply(response) ? response.raw : (response as ServerResponse);
}

/**
 * Limits the HTTP routes it guards, each with the options of `SluiceModule`, its controller's
 * `@RateLimit()` and its own. Register it for every route (`{ provide: APP_GUARD, useClass:
 * SluiceGuard }`) or per controller or route (`@UseGuards(SluiceGuard)`). Requests of other
 * transports (WebSockets, microservices, GraphQL) pass untouched. The handler finds the decision
 * with `@RateLimitDecision()` or on `request.rateLimit`; a refused request throws
 * {@link RateLimitException}. Errors (a store failure the limiter does not absorb, a throwing
 * `key` or `cost`) go to Nest's exception filters.
 *
 * @example
 * @Module({
 *   imports: [SluiceModule.forRoot({ limiter })],
 *   providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
 * })
 * export class AppModule {}
 */
export class SluiceGuard implements CanActivate {
  readonly #routes: RouteLimits;

  constructor(routes: RouteLimits) {
    this.#routes = routes;
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const route = this.#routes.routeFor(context.getClass(), context.getHandler());
    if (route === undefined) return true;
    const http = context.switchToHttp();
    const request = http.getRequest<object>();
    const response = http.getResponse<object>();
    this.#routes.handling(request, route);
    // Keyed on the Node request, as the Express and Fastify adapters are: their middlewares and this guard add up.
    const state = nodeRequestOf(request);
    const evaluation = await evaluate(route.config, request as NestHttpRequest, viewOf(request), state);
    if (evaluation.kind === 'skip') return true;
    if (evaluation.kind === 'allow') {
      Reflect.set(request, 'rateLimit', evaluation.info);
      setHeaders(response, evaluation.headers);
      finishOnEnd(nodeResponseOf(response), evaluation, response);
      return true;
    }
    setRefusalHeaders(response, evaluation.refusal.headers);
    throw new RateLimitException(denialInfo(evaluation));
  }
}

// Applied as functions rather than with decorator syntax, so that sluice builds without
// experimentalDecorators and emitDecoratorMetadata: Nest reads the same metadata either way.
Injectable()(SluiceGuard);
Inject(SLUICE_ROUTES)(SluiceGuard, undefined, 0);
