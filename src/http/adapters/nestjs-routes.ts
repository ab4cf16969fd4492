// Which options limit each Nest route: the module's, its controller's @RateLimit over them, its own over both.
// Resolved once per controller and route, through the options path every adapter uses. Imports no Nest code.
import type { IncomingHttpHeaders } from 'node:http';
import { invalidOption, SluiceError } from '../../errors.js';
import type { Limiter } from '../../limiter.js';
import { optionsObject } from '../../validate.js';
import { type KeyControls, keyControls } from '../controls.js';
import {
  type LimiterSet,
  type RateLimitOptions,
  type ResolvedOptions,
  resolveRateLimitOptions,
} from '../options.js';
import { limiterSet } from '../routes.js';
import { nodeRequestView, type RequestView } from '../view.js';

/**
 * What the options' functions (`key`, `cost`, `limit`, `skip`...) receive: the platform's request
 * (Express's `Request`, Fastify's `FastifyRequest`). Annotate the parameter with your platform's
 * type and it is inferred.
 */
export interface NestHttpRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

/**
 * The limiter(s) of a route: a limiter, an array of them, an `all([...])`, the name of a limiter
 * given to the module's `limiters` (or several names), or a function of the request.
 */
export type NestLimiterChoice<Req> =
  | LimiterSet
  | string
  | readonly string[]
  | ((request: Req) => LimiterSet | undefined);

/** The options of a module, a controller or a route: those of every adapter, with limiters by name. */
export interface NestRateLimitOptions<Req = NestHttpRequest> extends Omit<RateLimitOptions<Req>, 'limiter'> {
  /**
   * The limiter(s): one, several, `all([...])`, a name from the module's `limiters`, or a function
   * of the request. Without one anywhere (module, controller, route), a route is not limited.
   */
  readonly limiter?: NestLimiterChoice<Req>;
}

/** What `@RateLimit()` takes: a limiter's name, several names, or options merged over the controller's and module's. */
export type RateLimitSettings<Req = NestHttpRequest> = string | readonly string[] | NestRateLimitOptions<Req>;

/** Metadata a controller or route carries: its settings, or `false` for `@SkipRateLimit()`. */
export type RouteSettings = RateLimitSettings<never> | false;

/** The injection token of the module's options (as given, or as `forRootAsync`'s factory returns them). */
export const SLUICE_OPTIONS: unique symbol = Symbol('sluice options');

/** The injection token of the application's {@link RouteLimits}. */
export const SLUICE_ROUTES: unique symbol = Symbol('sluice routes');

/** The metadata key of `@RateLimit()` and `@SkipRateLimit()`. */
export const RATE_LIMIT_METADATA = 'sluice:rate-limit';

/** A route's resolved limits, and the controls (clientKey, resetKey) that follow them. */
export interface RouteLimit {
  readonly config: ResolvedOptions<NestHttpRequest>;
  readonly controls: KeyControls<[request: object]>;
}

/** What the adapter reads of the Node request under a platform's request. */
interface NodeRequest {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly socket?: { readonly remoteAddress?: string | undefined } | null | undefined;
}

/** The Node request under a platform's request: Fastify's `request.raw`, or Express's request itself. */
export function nodeRequestOf(request: object): NodeRequest {
  const raw: unknown = (request as { raw?: unknown }).raw;
  return (typeof raw === 'object' && raw !== null ? raw : request) as NodeRequest;
}

/** The framework-free view of a platform's request. */
export function viewOf(request: object): RequestView {
  const raw = nodeRequestOf(request);
  // Express's originalUrl: a router mounted under a prefix sees `url` relative to it.
  const originalUrl: unknown = (request as { originalUrl?: unknown }).originalUrl;
  return nodeRequestView({
    method: raw.method,
    url: typeof originalUrl === 'string' ? originalUrl : raw.url,
    headers: raw.headers,
    socket: raw.socket,
  });
}

/** The settings a decorator was given, as options; `undefined` for none. */
function asOptions(where: string, settings: RouteSettings | undefined): Record<string, unknown> | undefined {
  if (settings === undefined || settings === false) return undefined;
  if (typeof settings === 'string' || Array.isArray(settings)) return { limiter: settings };
  return optionsObject(where, settings, true);
}

/** Checks what `@RateLimit()` was given, when the decorator is applied. */
export function checkSettings(settings: unknown): void {
  const isName = (value: unknown) => typeof value === 'string' && value !== '';
  const isNames = Array.isArray(settings) && settings.length > 0 && settings.every(isName);
  const isOptions = typeof settings === 'object' && settings !== null && !Array.isArray(settings);
  if (isName(settings) || isNames || isOptions) return;
  throw invalidOption('@RateLimit', "a limiter's name, an array of names, or an options object", settings);
}

/** A controller class or a route's handler: what Nest's metadata is attached to. */
export type MetadataTarget = object & { readonly name: string };

/** Reads the settings `@RateLimit()` or `@SkipRateLimit()` left on a controller or handler. */
export type SettingsReader = (target: MetadataTarget) => RouteSettings | undefined;

/** The routes' limits of one Nest application: resolved once per controller and per route. */
export class RouteLimits {
  readonly #shared: Record<string, unknown>;
  readonly #named = new Map<string, Limiter>();
  readonly #module: RouteLimit | undefined;
  readonly #controllers = new Map<
    MetadataTarget,
    { readonly own: RouteLimit | undefined; readonly routes: Map<MetadataTarget, RouteLimit | undefined> }
  >();
  readonly #read: SettingsReader;
  /** The route each request is handled by, for the controls a handler calls. */
  readonly #requests = new WeakMap<object, RouteLimit>();

  constructor(options: unknown, read: SettingsReader) {
    this.#read = read;
    const { limiters, ...shared } = optionsObject('SluiceModule options', options, true);
    const list = limiters === undefined ? [] : limiters;
    if (!Array.isArray(list))
      throw invalidOption('limiters', 'an array of limiters from createLimiter()', limiters);
    list.forEach((limiter: Limiter, i) => {
      limiterSet(`limiters[${i}]`, limiter);
      if (typeof limiter.name !== 'string') {
        throw invalidOption(
          `limiters[${i}]`,
          'a limiter from createLimiter() (named by its `name`)',
          limiter,
        );
      }
      if (this.#named.has(limiter.name)) {
        throw invalidOption(`limiters[${i}].name`, 'a name no other limiter of `limiters` has', limiter.name);
      }
      this.#named.set(limiter.name, limiter);
    });
    this.#shared = shared;
    // Without a limiter (or routes) of its own, the module limits only the routes that name one.
    const limits = shared.limiter !== undefined || shared.routes !== undefined;
    this.#module = limits ? this.#resolve('SluiceModule', shared) : undefined;
  }

  /** The limits of a route; `undefined` when it is not limited. Bad settings throw, naming the route. */
  routeFor(controller: MetadataTarget, handler: MetadataTarget): RouteLimit | undefined {
    let known = this.#controllers.get(controller);
    if (known === undefined) {
      const settings = this.#read(controller);
      const own =
        settings === undefined ? this.#module : this.#merged(`@RateLimit of ${controller.name}`, [settings]);
      known = { own, routes: new Map() };
      this.#controllers.set(controller, known);
    }
    if (known.routes.has(handler)) return known.routes.get(handler);
    const settings = this.#read(handler);
    // A route's own settings win over its controller's, even over a controller's @SkipRateLimit().
    const route =
      settings === undefined
        ? known.own
        : this.#merged(`@RateLimit of ${controller.name}.${handler.name}`, [
            this.#read(controller),
            settings,
          ]);
    known.routes.set(handler, route);
    return route;
  }

  /** Remembers the route that handles a request (by its Node request). */
  handling(request: object, route: RouteLimit): void {
    this.#requests.set(nodeRequestOf(request), route);
  }

  /** The route that handles a request, else the module's limits. */
  routeOf(request: object): RouteLimit | undefined {
    return this.#requests.get(nodeRequestOf(request)) ?? this.#module;
  }

  /** The module's options, then each layer's settings over them; `undefined` when the last layer skips. */
  #merged(where: string, layers: readonly (RouteSettings | undefined)[]): RouteLimit | undefined {
    if (layers.at(-1) === false) return undefined;
    const merged: Record<string, unknown> = { ...this.#shared };
    for (const settings of layers) Object.assign(merged, asOptions(where, settings));
    return this.#resolve(where, merged);
  }

  #resolve(where: string, options: Record<string, unknown>): RouteLimit {
    try {
      const label = where === 'SluiceModule' ? where : '@RateLimit';
      const config = resolveRateLimitOptions<NestHttpRequest>(label, {
        ...options,
        limiter: this.#limiterOf(options.limiter),
      } as RateLimitOptions<NestHttpRequest>);
      const controls = keyControls(config, (request: object) => ({
        request: request as NestHttpRequest,
        view: viewOf(request),
      }));
      return { config, controls };
    } catch (error) {
      if (!(error instanceof SluiceError)) throw error;
      throw new SluiceError(error.code, `${where}: ${error.message}`, { cause: error });
    }
  }

  /** Names turned into the limiters of `limiters`; anything else as it is. */
  #limiterOf(choice: unknown): unknown {
    const byName = (name: string): Limiter => {
      const limiter = this.#named.get(name);
      if (limiter !== undefined) return limiter;
      const known = [...this.#named.keys()].map((known) => `'${known}'`).join(', ') || 'none';
      throw invalidOption('limiter', `the name of a limiter in SluiceModule's \`limiters\` (${known})`, name);
    };
    if (typeof choice === 'string') return byName(choice);
    if (Array.isArray(choice))
      return choice.map((item: unknown) => (typeof item === 'string' ? byName(item) : item));
    return choice;
  }
}
