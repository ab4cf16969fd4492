// The Nest decorators: @RateLimit() and @SkipRateLimit() on controllers and routes, @RateLimitDecision() on a handler's parameter.
import {
  type CustomDecorator,
  createParamDecorator,
  type ExecutionContext,
  SetMetadata,
} from '@nestjs/common';
import { infoOn } from '../handle.js';
import type { RateLimitInfo } from '../info.js';
import {
  checkSettings,
  type NestHttpRequest,
  nodeRequestOf,
  RATE_LIMIT_METADATA,
  type RateLimitSettings,
} from './nestjs-routes.js';

/**
 * Limits a controller's routes or one route: the name of a limiter given to the module's
 * `limiters`, several names (all must allow), or options merged over the controller's and the
 * module's (a route's over its controller's). Options not given are inherited: `{ limit: 10 }`
 * keeps the inherited limiter with a quota of 10. Bad settings fail the application's start,
 * naming the route.
 *
 * @example
 * @Controller('search')
 * @RateLimit('search')
 * export class SearchController {
 *   @Get() find() {}
 *   @Post('export') @RateLimit({ limit: 2, cost: 1 }) exportAll() {}
 * }
 */
export function RateLimit<Req = NestHttpRequest>(
  settings: RateLimitSettings<Req>,
): CustomDecorator<typeof RATE_LIMIT_METADATA> {
  checkSettings(settings);
  return SetMetadata(RATE_LIMIT_METADATA, settings);
}

/**
 * Turns the limits off for a controller or a route (a route's own `@RateLimit()` still limits it
 * inside a skipped controller).
 *
 * @example
 * @Get('health') @SkipRateLimit() health() { return 'up'; }
 */
export function SkipRateLimit(): CustomDecorator<typeof RATE_LIMIT_METADATA> {
  return SetMetadata(RATE_LIMIT_METADATA, false);
}

/**
 * A handler's parameter: what sluice decided for this request (limit, remaining, reset, key,
 * every policy), or `undefined` when no limiter decided it. The same value is on the request as
 * `request.rateLimit`.
 *
 * @example
 * @Get('quota')
 * quota(@RateLimitDecision() decision: RateLimitInfo | undefined) {
 *   return { remaining: decision?.remaining };
 * }
 */
export const RateLimitDecision: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext): RateLimitInfo | undefined =>
    infoOn(nodeRequestOf(context.switchToHttp().getRequest<object>())),
);
