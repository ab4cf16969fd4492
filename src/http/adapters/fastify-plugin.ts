// The Fastify plugin: limits every route of the scope it is registered in (or only those that ask),
// with per-route settings in `config.rateLimit` and the hook of your choice.
import type { FastifyInstance, RouteOptions } from 'fastify';
import { invalidOption } from '../../errors.js';
import { optionsObject } from '../../validate.js';
import { type FastifyRateLimitHook, type FastifyRateLimitOptions, rateLimit } from './fastify-hook.js';

/**
 * The hook that limits: `onRequest` (the default) refuses before the body is read; `preValidation`
 * or `preHandler` when the key comes from the parsed body or from authentication run in earlier hooks.
 */
export type FastifyRateLimitHookName = 'onRequest' | 'preValidation' | 'preHandler';

const HOOK_NAMES: readonly FastifyRateLimitHookName[] = ['onRequest', 'preValidation', 'preHandler'];

/** Options of {@link rateLimitPlugin}. */
export interface FastifyRateLimitPluginOptions extends Partial<FastifyRateLimitOptions> {
  /**
   * `true`: every route of the scope is limited (with its `config.rateLimit` merged over these
   * options, or not at all with `config: { rateLimit: false }`). `false`: only routes whose
   * `config.rateLimit` is an object.
   * @default true
   */
  readonly global?: boolean;
  /** @default 'onRequest' */
  readonly hook?: FastifyRateLimitHookName;
}

/** A route's `config.rateLimit`: options merged over the plugin's (`limiter`, `limit`, `key`, `hook`...). */
export interface FastifyRouteRateLimit extends Partial<FastifyRateLimitOptions> {
  readonly hook?: FastifyRateLimitHookName;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's rate limit, merged over the plugin's options; `false` for none. */
    rateLimit?: FastifyRouteRateLimit | false;
  }
}

function hookName(option: string, value: unknown): FastifyRateLimitHookName {
  if (value === undefined) return 'onRequest';
  if (!HOOK_NAMES.includes(value as FastifyRateLimitHookName)) {
    throw invalidOption(option, HOOK_NAMES.map((name) => `'${name}'`).join(', '), value);
  }
  return value as FastifyRateLimitHookName;
}

/** Adds the hook after the route's own hooks of that kind (an authentication preHandler runs first). */
function attach(route: RouteOptions, name: FastifyRateLimitHookName, hook: FastifyRateLimitHook): void {
  const existing: unknown = route[name];
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
  Reflect.set(route, name, [...list, hook]);
}

async function plugin(fastify: FastifyInstance, options: FastifyRateLimitPluginOptions): Promise<void> {
  const { global = true, hook, ...shared } = optionsObject('rateLimitPlugin options', options, false);
  if (typeof global !== 'boolean') throw invalidOption('global', 'true or false', global);
  const defaultHook = hookName('hook', hook);
  // Built once for every route without settings of its own; bad options fail the registration.
  const everyRoute = global ? rateLimit(shared as FastifyRateLimitOptions) : undefined;
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined, []);
  fastify.addHook('onRoute', (route) => {
    const settings: unknown = route.config?.rateLimit;
    if (settings === false) return;
    if (settings === undefined) {
      if (everyRoute !== undefined) attach(route, defaultHook, everyRoute);
      return;
    }
    const where = `config.rateLimit of ${route.method} ${route.url}`;
    const { hook: routeHook, ...own } = optionsObject(where, settings, true);
    const merged = { ...shared, ...own } as FastifyRateLimitOptions;
    attach(
      route,
      routeHook === undefined ? defaultHook : hookName(`${where}.hook`, routeHook),
      rateLimit(merged),
    );
  });
}

// What fastify-plugin would set, without depending on it: the hooks reach the scope that registers
// the plugin (its routes and its children's), not only routes declared inside the plugin.
Object.assign(plugin, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'sluice-rate-limit',
  [Symbol.for('plugin-meta')]: { name: 'sluice-rate-limit' },
});

/**
 * The Fastify plugin: registered in a scope, it limits the routes declared after it in that scope
 * and its children (not its siblings), each with `config: { rateLimit: {...} }` merged over these
 * options or `config: { rateLimit: false }` for none. The handler finds the decision on
 * `request.rateLimit`.
 *
 * @example
 * import Fastify from 'fastify';
 * import { rateLimitPlugin } from 'sluice/fastify';
 * const app = Fastify();
 * await app.register(rateLimitPlugin, { limiter });
 * app.get('/search', { config: { rateLimit: { limiter: searchLimiter } } }, search);
 * app.get('/health', { config: { rateLimit: false } }, () => 'up');
 */
export const rateLimitPlugin: (
  fastify: FastifyInstance,
  options: FastifyRateLimitPluginOptions,
) => Promise<void> = plugin;
