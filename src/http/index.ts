// `sluice/http`: the framework-free HTTP core (headers, problem bodies, client keys), re-exports only.
export {
  type ClientIpOptions,
  clientIp,
  headerKey,
  isKeyExtractor,
  type KeyExtractor,
} from './client-key.js';
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
  type ResolvedOptions,
  type RouteRule,
  resolveRateLimitOptions,
} from './options.js';
export {
  PROBLEM_CONTENT_TYPE,
  PROBLEM_TYPES,
  type ProblemDetails,
  type ProblemOptions,
  problemDetails,
  type Refusal,
  refusalFor,
} from './problem.js';
export { fetchRequestView, nodeRequestView, type RequestView } from './view.js';
