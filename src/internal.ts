// `sluice/internal`: the library's parts the server package (sluice-server) builds on; not covered by semver.

/**
 * What `sluice-server` (the `sluice` command, `sluice serve` and its Envoy service) uses of the library
 * beyond its public subpaths: header writers, stored-state decoders, group decisions, bounds. It is
 * published so that the server can import the library by name like any application, and for that
 * alone: any release may change or remove what it exports, which is why `sluice-server` pins the
 * exact version of `sluice` it was released with. Applications import `sluice`, `sluice/http` and
 * the other subpaths instead.
 *
 * @packageDocumentation
 */

export { BUDGET_DEFAULTS } from './budget/options.js';
export {
  type Group,
  groupFor,
  hasLeaseFields,
  limiterPipeline,
  newSettleId,
  settleReserved,
} from './core/index.js';
export { DEFAULT_DENY_MS } from './core/stored.js';
export { describeValue, errorDocs } from './errors.js';
export { describesUnit, STYLE_WRITERS } from './http/header-styles.js';
export { secondsUntilMore, sfString, wholeSeconds, wholeUnits } from './http/header-values.js';
export { chosenStyles } from './http/headers.js';
export { MAX_PAUSE_MS, MAX_WAIT_MS } from './operations.js';
export { decodeFixedWindow, decodeGcra, GCRA_EXPIRY_ROUNDING_MS } from './stores/redis/stored.js';
export { MAX_GROUP_SIZE } from './validate.js';
