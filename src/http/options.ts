// Middleware options shared by every adapter: their types, defaults, and the one path that validates them.
import { type CombinedLimiter, combinedGroup, groupFor } from '../combine.js';
import type { Group } from '../core/group.js';
import { invalidOption } from '../errors.js';
import type { Limiter } from '../limiter.js';
import { knownKeys, optionsObject } from '../validate.js';
import { clientIp, isKeyExtractor, type KeyExtractor } from './client-key.js';
import { HEADER_STYLES, type HeaderStyle } from './headers.js';
import type { ProblemOptions } from './problem.js';
import type { RequestView } from './view.js';

/**
 * One limiter, or several that must all allow (each adds its own header item): an array is
 * combined as `all(array)` combines it (one atomic script when every limiter shares a store), and
 * `all(limiters, options)` may be given as it is.
 */
export type LimiterSet = Limiter | readonly Limiter[] | CombinedLimiter;

/** Limiters for requests whose path (and method) match. The first matching rule wins. */
export interface RouteRule {
  /** `/login` matches that path only; `/api/*` matches `/api` and everything below; or a RegExp. */
  readonly path: string | RegExp;
  /** One method or several (case-insensitive); every method when absent. */
  readonly method?: string | readonly string[];
  readonly limiter: LimiterSet;
}

/**
 * A built-in extractor, or a function of the framework's request returning one identifier for
 * every limiter, or one per limiter in order (e.g. `[userId, tenantId]`, with a `tag`).
 */
export type KeySource<Req> =
  | KeyExtractor
  | ((
      request: Req,
    ) => string | readonly string[] | undefined | Promise<string | readonly string[] | undefined>);

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
   * A hash tag for the request's keys (see `CallOptions.tag`): with a `key` that returns one
   * identifier per limiter, a shared tag (the tenant) lets one script decide them all on Redis Cluster.
   * @default undefined (each identifier is its own tag)
   */
  readonly tag?: string | ((request: Req) => string | undefined | Promise<string | undefined>);
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
  /** The limiters for a request, as one group; `undefined` when it is not limited. */
  selectGroup(request: Req, view: RequestView): Group | undefined;
  readonly key: KeySource<Req>;
  readonly tag: string | ((request: Req) => string | undefined | Promise<string | undefined>) | undefined;
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
  'tag',
  'missingKey',
  'cost',
  'skip',
  'count',
  'isFailure',
  'headers',
  'problem',
  'onRefundError',
] as const;

const EXPECTED_LIMITERS = 'a limiter from createLimiter(), a non-empty array of them, or all([...])';

/** The group for a limiter, an array of them, or an all(): validated as all() validates. */
function limiterSet(option: string, value: unknown): Group {
  const combined = combinedGroup(value);
  if (combined !== undefined) return combined;
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0) throw invalidOption(option, EXPECTED_LIMITERS, value);
  try {
    return groupFor(list, undefined, option);
  } catch (error) {
    if (list.length === 1) throw invalidOption(option, EXPECTED_LIMITERS, value);
    throw error;
  }
}

/** Groups for what a `limiter` function returns, made once per limiter, array or all(). */
function chosenGroups(): (value: unknown) => Group {
  const made = new WeakMap<object, Group>();
  return (value) => {
    if (typeof value === 'object' && value !== null) {
      const known = made.get(value);
      if (known !== undefined) return known;
      const group = limiterSet('limiter (returned by the function)', value);
      made.set(value, group);
      return group;
    }
    return limiterSet('limiter (returned by the function)', value);
  };
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
  readonly group: Group;
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
  const group = limiterSet(`routes[${index}].limiter`, raw.limiter);
  return {
    matches: (view) => (upper === undefined || upper.includes(view.method)) && matchesPath(view.path),
    group,
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
  const chosen = chosenGroups();
  const tag = raw.tag;
  if (tag !== undefined && typeof tag !== 'function' && typeof tag !== 'string') {
    throw invalidOption('tag', 'a string or a function of the request', tag);
  }

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
    selectGroup(request: Req, view: RequestView): Group | undefined {
      for (const route of compiled) if (route.matches(view)) return route.group;
      if (chooser === undefined) return fallback;
      const value = chooser(request);
      return value === undefined ? undefined : chosen(value);
    },
    key: key as KeySource<Req>,
    tag: tag as ResolvedOptions<Req>['tag'],
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
