// The public surface of sluice: re-exports only.
export {
  CONCURRENCY_MAX_LIMIT,
  type ConcurrencyOptions,
  type ConcurrencyState,
  concurrency,
} from './algorithms/concurrency.js';
export type { DebtOptions } from './algorithms/debt.js';
export { type FixedWindowOptions, type FixedWindowState, fixedWindow } from './algorithms/fixed-window.js';
export {
  type GcraOptions,
  type GcraPause,
  type GcraPaused,
  type GcraState,
  gcra,
  type TokenBucketOptions,
  tokenBucket,
} from './algorithms/gcra.js';
export {
  SLIDING_LOG_MAX_LIMIT,
  type SlidingLogOptions,
  type SlidingLogState,
  slidingLog,
} from './algorithms/sliding-log.js';
export {
  type SlidingWindowOptions,
  type SlidingWindowState,
  slidingWindow,
} from './algorithms/sliding-window.js';
export type { BudgetOptions } from './budget/options.js';
export type { BudgetView } from './budget/view.js';
export {
  type AllOptions,
  all,
  type CombinedCallOptions,
  type CombinedLimiter,
  type Identifiers,
} from './combine.js';
export type { CombinedDecision, MemberDecision } from './core/combined-decision.js';
export { DENY_RETRY_AFTER_MS, type FailureMode } from './core/health.js';
export { ERROR_CODES, type ErrorCode, SluiceError } from './errors.js';
export type {
  CountedCall,
  DecisionCounter,
  DecisionHook,
  DecisionSource,
  DenyList,
  ErrorHook,
  HookContext,
  MetricsRecorder,
  WaitEvent,
} from './hooks.js';
export {
  type BudgetLimiter,
  type CallOptions,
  createLimiter,
  type KeyOptions,
  type Limiter,
  type WaitDecision,
  type WaitOptions,
} from './limiter.js';
export {
  type LoginBudget,
  type LoginDecision,
  type LoginDimension,
  type LoginGuard,
  type LoginGuardOptions,
  loginGuard,
  normalizeUsername,
} from './login-guard.js';
export { LIMITER_DEFAULTS, type LimiterOptions } from './options.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export { RedisStore, type RedisStoreOptions } from './stores/redis/store.js';
export type {
  AtomicBatch,
  ChargeDecision,
  ChargeOptions,
  Decision,
  DecisionReason,
  Denial,
  DenyOptions,
  Lease,
  LimitDecision,
  LimiterDeadline,
  LookDecision,
  Operation,
  Outcome,
  Policy,
  PolicyRule,
  Reservation,
  ScriptName,
  Store,
  StoredEntries,
  StoredEntry,
  StoredKind,
  StoredLimit,
  StoredLimitOptions,
  StoredLimitRule,
  StoredOptions,
  StoredWrite,
  StoreFailure,
  StoreReply,
  StoreRequest,
  StoreResult,
  StoreScripts,
  TakeDecision,
  TakeOptions,
} from './types.js';
export { isStoreFailure, STORED_READS } from './types.js';
