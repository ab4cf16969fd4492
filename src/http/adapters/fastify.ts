// Adapter for Fastify 4 and 5: the hook and the plugin, re-exports only. Imports Fastify's types only, never its runtime.
export { type ClientIpOptions, clientIp, headerKey } from '../client-key.js';
export type { DenialInfo } from '../handle.js';
export type { RateLimitInfo } from '../info.js';
export { bodyBytes } from '../settle.js';
export { type ShedOptions, type ShedRefusal, shedRefusal } from '../shed.js';
export { type FastifyRateLimitHook, type FastifyRateLimitOptions, rateLimit } from './fastify-hook.js';
export {
  type FastifyRateLimitHookName,
  type FastifyRateLimitPluginOptions,
  type FastifyRouteRateLimit,
  rateLimitPlugin,
} from './fastify-plugin.js';
export { shed } from './fastify-shed.js';
