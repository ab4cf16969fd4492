// Adapter for NestJS 11 and later, on @nestjs/platform-express or @nestjs/platform-fastify: module, guard, decorators,
// and a storage for @nestjs/throttler. Re-exports only.
export { type ClientIpOptions, clientIp, headerKey } from '../client-key.js';
export type { DenialInfo } from '../handle.js';
export type { RateLimitInfo } from '../info.js';
export { bodyBytes } from '../settle.js';
export { type ShedOptions, type ShedRefusal, shedRefusal } from '../shed.js';
export { RateLimit, RateLimitDecision, SkipRateLimit } from './nestjs-decorators.js';
export { RateLimitException, SluiceGuard } from './nestjs-guard.js';
export {
  SluiceModule,
  type SluiceModuleAsyncOptions,
  type SluiceModuleOptions,
  SluiceService,
} from './nestjs-module.js';
export type {
  NestHttpRequest,
  NestLimiterChoice,
  NestRateLimitOptions,
  RateLimitSettings,
} from './nestjs-routes.js';
export { shed } from './nestjs-shed.js';
export {
  SluiceThrottlerStorage,
  type SluiceThrottlerStorageOptions,
  type ThrottlerStorageRecord,
} from './nestjs-throttler.js';
