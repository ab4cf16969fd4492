// `sluice/metrics`: recorders for createLimiter({ metrics }) — Prometheus, OpenTelemetry, or in process.
export type { DenyList, MetricsRecorder } from '../hooks.js';
export {
  DENY_LISTS,
  INSTRUMENTS,
  type MetricOutcome,
  /**
   * @deprecated Use {@link MetricOutcome}, the same type: `Outcome` on its own names what an algorithm's twin returns
   * (exported by `sluice`).
   */
  type MetricOutcome as Outcome,
  type SkipReason,
  STORE_SECONDS_BUCKETS,
  WAIT_SECONDS_BUCKETS,
} from './definitions.js';
export {
  type OpenTelemetryMeter,
  type OpenTelemetryMetricsOptions,
  openTelemetryMetrics,
} from './opentelemetry.js';
export { METRICS_DEFAULTS } from './options.js';
export {
  type PrometheusMetrics,
  type PrometheusMetricsOptions,
  type PrometheusRegistry,
  prometheusMetrics,
} from './prometheus.js';
export {
  openTelemetryShedMetrics,
  type PrometheusShedMetrics,
  prometheusShedMetrics,
} from './shed.js';
export { type HeavyHitter, RecentHeavyHitters, SpaceSaving } from './space-saving.js';
export {
  DecisionMetrics,
  type DecisionMetricsOptions,
  decisionMetrics,
  type LimiterMetrics,
} from './tally.js';
