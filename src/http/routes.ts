// Which limiters decide a request: one set for all, one per matching route rule, or a function's choice.
import { type CombinedLimiter, combinedGroup, type Group, groupFor } from '../core/index.js';
import { invalidOption } from '../errors.js';
import type { MetricsRecorder } from '../hooks.js';
import type { Limiter } from '../types.js';
import { knownKeys, optionsObject } from '../validate.js';
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

const EXPECTED_LIMITERS = 'a limiter from createLimiter(), a non-empty array of them, or all([...])';

/** The group for a limiter, an array of them, or an all(): validated as all() validates. */
export function limiterSet(option: string, value: unknown): Group {
  const combined = combinedGroup(value);
  if (combined !== undefined) return combined;
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0) throw invalidOption(option, EXPECTED_LIMITERS, value);
  try {
    // One limiter decides as `limiter.limit()` does; atomicity only means something for several
    // (and would ask its store for submit(), which a store of one's own may lack).
    return groupFor(list, { atomic: list.length === 1 ? false : undefined, option });
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

/** Chooses the group of a request: the first matching route rule's, else `limiter`'s (or its function's). */
export type GroupSelector<Req> = (request: Req, view: RequestView) => Group | undefined;

/**
 * The selector for the `limiter` and `routes` options, validated; `metrics` counts the decisions of
 * every limiter it hands out.
 */
export function groupSelector<Req>(
  limiterOption: unknown,
  routesOption: unknown,
  metrics?: MetricsRecorder,
): GroupSelector<Req> {
  const routes = routesOption === undefined ? [] : routesOption;
  if (!Array.isArray(routes)) throw invalidOption('routes', 'an array of { path, method?, limiter }', routes);
  const compiled = routes.map((rule, index) => compileRoute(index, rule));
  const counted = (group: Group): Group => {
    if (metrics !== undefined) for (const pipeline of group.pipelines) pipeline.attach(metrics);
    return group;
  };
  for (const route of compiled) counted(route.group);
  if (limiterOption === undefined && compiled.length === 0) {
    throw invalidOption('limiter', 'a limiter from createLimiter() (or `routes`)', limiterOption);
  }
  const fallback =
    limiterOption === undefined || typeof limiterOption === 'function'
      ? undefined
      : counted(limiterSet('limiter', limiterOption));
  const chooser =
    typeof limiterOption === 'function' ? (limiterOption as (request: Req) => unknown) : undefined;
  const chosen = chosenGroups();
  return (request, view) => {
    for (const route of compiled) if (route.matches(view)) return route.group;
    if (chooser === undefined) return fallback;
    const value = chooser(request);
    return value === undefined ? undefined : counted(chosen(value));
  };
}
