// `sluice/shed`: adaptive concurrency limits and load shedding by priority, in process.
export {
  AIMD_DEFAULTS,
  AimdLimit,
  type AimdParams,
  BOUNDS_DEFAULTS,
  GRADIENT2_DEFAULTS,
  Gradient2Limit,
  type Gradient2Params,
  type LimitAlgorithm,
  type LimitBounds,
  type LimitOption,
  type LimitWindow,
  resolveLimit,
  VEGAS_DEFAULTS,
  VegasLimit,
  type VegasParams,
  WINDOW_DEFAULTS,
  type WindowOptions,
} from './limits/index.js';
export { SHEDDER_DEFAULTS, type ShedderOptions } from './options.js';
export { DEFAULT_PRIORITIES, type PrioritiesOption, type PriorityClass } from './priorities.js';
export { createShedder, type Shedder } from './shedder.js';
export type {
  AcquireOptions,
  Admission,
  PriorityStats,
  Refusal,
  ReleaseOptions,
  ShedderStats,
  ShedderView,
  ShedMetricsRecorder,
  Ticket,
} from './types.js';
