// The public surface of sluice: re-exports only.
export { fixedWindow, type FixedWindowOptions, type FixedWindowState } from './algorithms/fixed-window.js';
export { gcra, tokenBucket, type GcraOptions, type TokenBucketOptions } from './algorithms/gcra.js';
export {
  SLIDING_LOG_MAX_LIMIT,
  slidingLog,
  type SlidingLogOptions,
  type SlidingLogState,
} from './algorithms/sliding-log.js';
export { slidingWindow, type SlidingWindowOptions, type SlidingWindowState } from './algorithms/sliding-window.js';
export { ERROR_CODES, type ErrorCode, SluiceError } from './errors.js';
export { type CallOptions, createLimiter, type Limiter } from './limiter.js';
export type { LimiterOptions } from './options.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export { RedisStore, type RedisStoreOptions } from './stores/redis/store.js';
export type {
  Decision,
  DecisionReason,
  Operation,
  Outcome,
  Policy,
  ScriptName,
  Store,
  StoreRequest,
  StoreResult,
} from './types.js';
