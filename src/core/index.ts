// The core's one entry for the rest of sluice: the limiter, groups of limiters, the checks they share.
// Adapters, the Envoy service, the login guard and the penalties import from here; the public
// modules (limiter.ts, combine.ts, index.ts) re-export what users see.
export { storeError } from './answers.js';
export { checkIdentifier, checkTag, policyFor } from './checks.js';
export {
  Combined,
  type CombinedCallOptions,
  type CombinedLimiter,
  combinedGroup,
  type GroupSettings,
  groupFor,
} from './combined.js';
export { type CombinedDecision, combineDecisions, type MemberDecision } from './combined-decision.js';
export type {
  Grant,
  Group,
  GroupCallOptions,
  GroupOutcome,
  Identifiers,
  PerMember,
} from './group.js';
export { DENY_RETRY_AFTER_MS, type FailureMode } from './health.js';
export { hasLeaseFields } from './leases.js';
export { limiterPipeline, RateLimiter } from './limiter.js';
export { type CallParts, Pipeline } from './pipeline.js';
export {
  checkActual,
  LimiterReservation,
  newSettleId,
  settleCall,
  settleReserved,
} from './reservation.js';
export { askSlot, Slot } from './slot.js';
export { checkMaxWaitMs, isLateSlot, WAIT_DEFAULTS, waitFor } from './waiting.js';
