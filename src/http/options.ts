// Middleware options shared by every adapter: their types, defaults, and the one path that validates them.
import { invalidOption } from '../errors.js';
import { isLimiter, type Limiter } from '../limiter.js';
import { knownKeys, optionsObject } from '../validate.js';
import { clientIp, isKeyExtractor, type KeyExtractor } from './client-key.js';
import { HEADER_STYLES, type HeaderStyle } from './headers.js';
import type { ProblemOptions } from './problem.js';
import type { RequestView } from './view.js';

/** One limiter, or several that must all allow (each adds its own header item). */
export type LimiterSet = Limiter | readonly Limiter[];

/** Limiters for requests whose path (and method) match. The first matching rule wins. */
export interface RouteRule {
  /** `/login` matches that path only; `/api/*` matches `/api` and everything below; or a RegExp. */
  readonly path: string | RegExp;
  /** One method or several (case-insensitive); every method when absent. */
  readonly method?: string | readonly string[];
  readonly limiter: LimiterSet;
}

/** A built-in extractor, or a function of the framework's request. */
export type KeySource<Req> =
  | KeyExtractor
  | ((request: Req) => string | undefined | Promise<string | undefined>);

/** Options every adapter accepts. `Req` is the framework's request (or context, for Hono). */
export interface RateLimitOptions<Req> {
  /**
   * The limiter(s) for every request, or a function choosing them per request (`undefined`: not
   * limited). Requests matching `routes` use the route's limiters instead.
   */
  readonly limiter?: LimiterSet | ((request: Req) => LimiterSet | undefined);
  /** Per-route limiters, tried in order before `limiter`. */
  readonly routes?: readonly RouteRule[];
  /**
   * Whose quota a request uses: `clientIp()`, `headerKey('x-api-key')`, or a function.
   * @default clientIp() (the socket's peer; no proxy trusted)
   */
  readonly key?: KeySource<Req>;
  /**
   * A request without a usable key (no address, no header, a key over 1 KiB): `shared` puts all
   * of them in one bucket keyed `(unknown)`; `deny` answers 400 with a problem body.
   * @default 'shared'
   */
  readonly missingKey?: 'shared' | 'deny';
  /**
   * Units a request takes: a number, or a function of the request. 0 lets the request through
   * without counting it.
   * @default 1
   */
  readonly cost?: number | ((request: Req) => number | Promise<number>);
  /** Requests for which this returns true are not limited and get no headers. */
  readonly skip?: (request: Req) => boolean | Promise<boolean>;
  /**
   * Which responses keep their units: every one, only failed ones (successes are refunded once
   * the response is finished; e.g. failed logins), or only successful ones.
   * @default 'all'
   */
  readonly count?: 'all' | 'failed' | 'successful';
  /**
   * What counts as failed for `count`. A response that never finished counts as failed.
   * @default (status) => status >= 400
   */
  readonly isFailure?: (status: number) => boolean;
  /**
   * Header styles to write, or `false` for none (`Retry-After` is still sent with a 429).
   * @default 'ietf'
   */
  readonly headers?: HeaderStyle | readonly HeaderStyle[] | false;
  /** Overrides for the 429 problem body's `type` and `title`. */
  readonly problem?: ProblemOptions;
  /** Receives errors of refunds made after the response (count modes, refused combinations). */
  readonly onRefundError?: (error: unknown) => void;
}

/** The resolved, validated configuration the core runs on. */
export interface ResolvedOptions<Req> {
  selectLimiters(request: Req, view: RequestView): readonly Limiter[];
  readonly key: KeySource<Req>;
  readonly missingKey: 'shared' | 'deny';
  readonly cost: number | ((request: Req) => number | Promise<number>);
  readonly skip: ((request: Req) => boolean | Promise<boolean>) | undefined;
  readonly count: 'all' | 'failed' | 'successful';
  readonly isFailure: (status: number) => boolean;
  readonly styles: readonly HeaderStyle[];
  readonly problem: ProblemOptions;
  readonly onRefundError: (error: unknown) => void;
}

/** The option names of {@link RateLimitOptions}; adapters add their own. */
export const CORE_OPTION_KEYS = [
  'limiter',
  'routes',
  'key',
  'missingKey',
  'cost',
  'skip',
  'count',
  'isFailure',
  'headers',
  'problem',
  'onRefundError',
] as const;

function limiterSet(option: string, value: unknown): readonly Limiter[] {
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0 || !list.every(isLimiter)) {
    throw invalidOption(option, 'a limiter from createLimiter() or a non-empty array of them', value);
  }
  return Object.freeze([...list]);
}

function optionalFunction(option: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') throw invalidOption(option, 'a function', value);
}

/** An adapter's own optional function option, checked. */
export function adapterFunction<F>(option: string, value: F | undefined): F | undefined {
  optionalFunction(option, value);
  return value;
}

interface CompiledRoute {
  readonly matches: (view: RequestView) => boolean;
  readonly limiters: readonly Limiter[];
}

function compileRoute(index: number, rule: unknown): CompiledRoute {
  const raw = optionsObject(`routes[${index}]`, rule, true);
  knownKeys(`routes[${index}]`, raw, ['path', 'method', 'limiter']);
  const { path, method } = raw;
  let matchesPath: (requestPath: string) => boolean;
  if (path instanceof RegExp) {
    matchesPath = (requestPath) => {
      path.lastIndex = 0;
      return path.test(requestPath);
    };
  } else if (typeof path === 'string' && path.startsWith('/')) {
    const prefix = path.endsWith('/*') ? path.slice(0, -2) : undefined;
    matchesPath =
      prefix === undefined
        ? (requestPath) => requestPath === path
        : (requestPath) => requestPath === prefix || requestPath.startsWith(`${prefix}/`);
  } else {
    throw invalidOption(
      `routes[${index}].path`,
      "a path starting with '/' (ending in '/*' for a prefix) or a RegExp",
      path,
    );
  }
  const methods = method === undefined ? undefined : Array.isArray(method) ? method : [method];
  if (methods !== undefined && !methods.every((m) => typeof m === 'string' && m !== '')) {
    throw invalidOption(`routes[${index}].method`, 'a method name or an array of them', method);
  }
  const upper = methods?.map((m: string) => m.toUpperCase());
  const limiters = limiterSet(`routes[${index}].limiter`, raw.limiter);
  return {
    matches: (view) => (upper === undefined || upper.includes(view.method)) && matchesPath(view.path),
    limiters,
  };
}

function headerStyles(value: unknown): readonly HeaderStyle[] {
  if (value === false) return [];
  if (value === undefined) return ['ietf'];
  const list = Array.isArray(value) ? value : [value];
  if (!list.every((style) => HEADER_STYLES.includes(style as HeaderStyle))) {
    throw invalidOption('headers', "false, 'ietf', 'draft-6', 'legacy', or an array of them", value);
  }
  return Object.freeze([...(list as HeaderStyle[])]);
}

/**
 * Validates middleware options and applies defaults; throws a SluiceError naming the first bad
 * option. `adapterKeys` are the options the calling adapter adds (and validates itself).
 */
export function resolveRateLimitOptions<Req>(
  adapter: string,
  options: RateLimitOptions<Req>,
  adapterKeys: readonly string[] = [],
): ResolvedOptions<Req> {
  const raw = optionsObject(`${adapter} options`, options, true);
  knownKeys(adapter, raw, [...CORE_OPTION_KEYS, ...adapterKeys]);
  const routes = raw.routes === undefined ? [] : raw.routes;
  if (!Array.isArray(routes)) throw invalidOption('routes', 'an array of { path, method?, limiter }', routes);
  const compiled = routes.map((rule, index) => compileRoute(index, rule));
  const limiterOption = raw.limiter;
  if (limiterOption === undefined && compiled.length === 0) {
    throw invalidOption('limiter', 'a limiter from createLimiter() (or `routes`)', limiterOption);
  }
  const fallback =
    limiterOption === undefined || typeof limiterOption === 'function'
      ? undefined
      : limiterSet('limiter', limiterOption);
  const chooser =
    typeof limiterOption === 'function' ? (limiterOption as (request: Req) => unknown) : undefined;

  const key = raw.key ?? clientIp();
  if (typeof key !== 'function' && !isKeyExtractor(key)) {
    throw invalidOption('key', 'clientIp(), headerKey(name), or a function of the request', key);
  }
  const missingKey = raw.missingKey ?? 'shared';
  if (missingKey !== 'shared' && missingKey !== 'deny')
    throw invalidOption('missingKey', "'shared' or 'deny'", missingKey);
  const cost = raw.cost ?? 1;
  if (typeof cost !== 'function' && (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0)) {
    throw invalidOption('cost', 'a whole number of at least 0, or a function of the request', cost);
  }
  const count = raw.count ?? 'all';
  if (count !== 'all' && count !== 'failed' && count !== 'successful') {
    throw invalidOption('count', "'all', 'failed' or 'successful'", count);
  }
  for (const name of ['skip', 'isFailure', 'onRefundError'] as const) optionalFunction(name, raw[name]);
  const problem = raw.problem === undefined ? {} : optionsObject('problem', raw.problem, true);
  knownKeys('problem', problem, ['type', 'title']);
  for (const name of ['type', 'title'] as const) {
    if (problem[name] !== undefined && typeof problem[name] !== 'string') {
      throw invalidOption(`problem.${name}`, 'a string', problem[name]);
    }
  }

  return Object.freeze({
    selectLimiters(request: Req, view: RequestView): readonly Limiter[] {
      for (const route of compiled) if (route.matches(view)) return route.limiters;
      if (chooser === undefined) return fallback ?? [];
      const chosen = chooser(request);
      return chosen === undefined ? [] : limiterSet('limiter (returned by the function)', chosen);
    },
    key: key as KeySource<Req>,
    missingKey,
    cost: cost as ResolvedOptions<Req>['cost'],
    skip: raw.skip as ResolvedOptions<Req>['skip'],
    count,
    isFailure:
      (raw.isFailure as ((status: number) => boolean) | undefined) ?? ((status: number) => status >= 400),
    styles: headerStyles(raw.headers),
    problem: problem as ProblemOptions,
    onRefundError: (raw.onRefundError as ((error: unknown) => void) | undefined) ?? (() => {}),
  });
}
