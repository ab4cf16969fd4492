// `sluice/http`: the framework-free HTTP core (headers, problem bodies, client keys), re-exports only.
export {
  type ClientIpOptions,
  clientIp,
  headerKey,
  isKeyExtractor,
  type KeyExtractor,
} from './client-key.js';
export type { KeyControls } from './controls.js';
export { type DenialInfo, type Evaluation, evaluate, UNKNOWN_KEY } from './handle.js';
export {
  HEADER_STYLES,
  type HeaderOptions,
  type HeaderStyle,
  isEnforcedDenial,
  type PolicyDecision,
  rateLimitHeaders,
  retryAfterSeconds,
} from './headers.js';
export type { RateLimitInfo } from './info.js';
export {
  type Address,
  addressKey,
  type Cidr,
  cidrContains,
  formatAddress,
  parseAddress,
  parseCidr,
} from './ip.js';
export {
  type KeySource,
  type LimiterSet,
  type RateLimitOptions,
  type RequestLimit,
  type ResolvedOptions,
  type RouteRule,
  resolveRateLimitOptions,
} from './options.js';
export type { PartitionKeyOption } from './partition-key.js';
export type { BanOptions, BlockOptions } from './penalties.js';
export {
  PROBLEM_CONTENT_TYPE,
  PROBLEM_TYPES,
  type ProblemDetails,
  type ProblemOptions,
  type ProblemRefusal,
  /**
   * @deprecated Use {@link ProblemRefusal}, the same type: `Refusal` on its own names a shedder's refusal (exported by
   * `sluice/shed`).
   */
  type ProblemRefusal as Refusal,
  penaltyRefusal,
  problemDetails,
  refusalFor,
} from './problem.js';
export { bodyBytes, type Finished } from './settle.js';
export { fetchRequestView, nodeRequestView, type RequestView } from './view.js';
export { type SluiceWarning, WARNING_CODES, type WarningCode, type WarningOptions } from './warnings.js';
