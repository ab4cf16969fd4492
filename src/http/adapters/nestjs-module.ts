// SluiceModule (forRoot, forRootAsync) and SluiceService, the handlers' way to a client's key; routes resolved at start.
import {
  type DynamicModule,
  Inject,
  Injectable,
  type InjectionToken,
  Module,
  type ModuleMetadata,
  type OptionalFactoryDependency,
  type Provider,
} from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { Limiter } from '../../limiter.js';
import { infoOn } from '../handle.js';
import type { RateLimitInfo } from '../info.js';
import {
  type MetadataTarget,
  type NestHttpRequest,
  type NestRateLimitOptions,
  nodeRequestOf,
  RATE_LIMIT_METADATA,
  RouteLimits,
  type RouteSettings,
  SLUICE_OPTIONS,
  SLUICE_ROUTES,
} from './nestjs-routes.js';

/** Options of {@link SluiceModule.forRoot}: those of every adapter, with limiters routes may name. */
export interface SluiceModuleOptions<Req = NestHttpRequest> extends NestRateLimitOptions<Req> {
  /**
   * Limiters that `@RateLimit('name')` (or `limiter: 'name'`) refers to by their `name`.
   * @default []
   */
  readonly limiters?: readonly Limiter[];
}

/** Options of {@link SluiceModule.forRootAsync}: a factory of the options, with what it needs injected. */
export interface SluiceModuleAsyncOptions<Req = NestHttpRequest> extends Pick<ModuleMetadata, 'imports'> {
  /** Returns the module's options; receives the providers named in `inject`, in order. */
  readonly useFactory: (...args: never[]) => SluiceModuleOptions<Req> | Promise<SluiceModuleOptions<Req>>;
  /**
   * Providers the factory receives (e.g. a `ConfigService`, a Redis client).
   * @default []
   */
  readonly inject?: readonly (InjectionToken | OptionalFactoryDependency)[];
}

/**
 * The routes' limits, resolved for every route of every controller when the application is made:
 * a bad `@RateLimit()` fails the start, naming the route, rather than a request.
 */
function routeLimits(options: unknown, discovery: DiscoveryService): RouteLimits {
  const reflector = new Reflector();
  const read = (target: MetadataTarget) =>
    reflector.get<RouteSettings | undefined>(RATE_LIMIT_METADATA, target as never);
  const routes = new RouteLimits(options, read);
  const scanner = new MetadataScanner();
  for (const wrapper of discovery.getControllers()) {
    const controller: unknown = wrapper.metatype;
    if (typeof controller !== 'function') continue;
    const prototype = controller.prototype as Record<string, unknown>;
    for (const name of scanner.getAllMethodNames(prototype)) {
      const handler = prototype[name];
      if (typeof handler === 'function') routes.routeFor(controller, handler);
    }
  }
  return routes;
}

function moduleWith(options: Provider, imports: NonNullable<ModuleMetadata['imports']>): DynamicModule {
  return {
    module: SluiceModule,
    // Global, so that SluiceGuard and SluiceService are found from every module's controllers.
    global: true,
    imports: [DiscoveryModule, ...imports],
    providers: [
      options,
      { provide: SLUICE_ROUTES, useFactory: routeLimits, inject: [SLUICE_OPTIONS, DiscoveryService] },
      SluiceService,
    ],
    exports: [SLUICE_ROUTES, SluiceService],
  };
}

/**
 * Rate limiting for a Nest application: the limiters and options every route starts from. Add
 * `SluiceGuard` (for every route with `APP_GUARD`, or per controller with `@UseGuards`), and
 * `@RateLimit()` or `@SkipRateLimit()` where a controller or route differs. Global: import it
 * once, in the root module.
 *
 * @example
 * @Module({
 *   imports: [SluiceModule.forRoot({ limiter: api, limiters: [search] })],
 *   providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
 * })
 * export class AppModule {}
 */
// biome-ignore lint/complexity/noStaticOnlyClass: Nest knows a module by its class; forRoot and forRootAsync are its convention.
export class SluiceModule {
  /** The module with these options. */
  static forRoot<Req = NestHttpRequest>(options: SluiceModuleOptions<Req>): DynamicModule {
    return moduleWith({ provide: SLUICE_OPTIONS, useValue: options }, []);
  }

  /**
   * The module with options made by a factory, e.g. from configuration or a Redis client other
   * providers make.
   *
   * @example
   * SluiceModule.forRootAsync({
   *   imports: [RedisModule],
   *   inject: [REDIS],
   *   useFactory: (redis: Redis) => ({ limiter: createLimiter({ store: new RedisStore({ client: redis }), policy, name: 'api' }) }),
   * })
   */
  static forRootAsync<Req = NestHttpRequest>(options: SluiceModuleAsyncOptions<Req>): DynamicModule {
    const provider: Provider = {
      provide: SLUICE_OPTIONS,
      useFactory: options.useFactory,
      inject: [...(options.inject ?? [])],
    };
    return moduleWith(provider, options.imports ?? []);
  }
}

/**
 * For handlers: the decision on a request, and its client's key as the route's limits compute it.
 *
 * @example
 * @Controller('auth')
 * export class LoginController {
 *   constructor(private readonly sluice: SluiceService) {}
 *   @Post('login')
 *   async login(@Req() req: Request) {
 *     if (await valid(req)) await this.sluice.resetKey(req); // a good login forgives earlier attempts
 *     return { remaining: this.sluice.info(req)?.remaining };
 *   }
 * }
 */
export class SluiceService {
  readonly #routes: RouteLimits;

  constructor(routes: RouteLimits) {
    this.#routes = routes;
  }

  /** The decision taken on the request so far (the platform's request); `undefined` before any. */
  info(request: object): RateLimitInfo | undefined {
    return infoOn(nodeRequestOf(request));
  }

  /**
   * The identifier the request is charged under by its route's limits (the module's for a route
   * the guard does not limit), or `undefined` when none limits it.
   */
  async clientKey(request: object): Promise<string | undefined> {
    return this.#routes.routeOf(request)?.controls.clientKey(request);
  }

  /** Forgets the request's client in the limiters of its route (and lifts its ban and block). */
  async resetKey(request: object): Promise<void> {
    await this.#routes.routeOf(request)?.controls.resetKey(request);
  }
}

// Applied as functions rather than with decorator syntax, so that sluice builds without
// experimentalDecorators and emitDecoratorMetadata: Nest reads the same metadata either way.
Module({})(SluiceModule);
Injectable()(SluiceService);
Inject(SLUICE_ROUTES)(SluiceService, undefined, 0);
