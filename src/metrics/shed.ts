// Metrics of load shedders (sluice/shed): limit, tickets in flight, admissions, refusals and drops per class, latency.
import { invalidOption } from '../errors.js';
import type { ShedderStats, ShedderView, ShedMetricsRecorder } from '../shed/types.js';
import type { OpenTelemetryMeter } from './opentelemetry.js';
import type { PrometheusRegistry } from './prometheus.js';
import type { RegistryMetric, Sample } from './registry-metric.js';

/** The shedder metrics: Prometheus name, OpenTelemetry name and unit, help, and what each reads. */
const SHED_METRICS = [
  {
    prometheus: 'sluice_shed_limit',
    openTelemetry: 'sluice.shed.limit',
    unit: '{request}',
    type: 'gauge',
    help: 'The concurrency limit the shedder holds now, as its algorithm set it from latency.',
    read: (stats: ShedderStats) => [{ value: stats.limit, labels: {} }],
  },
  {
    prometheus: 'sluice_shed_in_flight',
    openTelemetry: 'sluice.shed.in_flight',
    unit: '{request}',
    type: 'gauge',
    help: 'Tickets out now, by priority class.',
    read: (stats: ShedderStats) => byPriority(stats, 'inFlight'),
  },
  {
    prometheus: 'sluice_shed_queued',
    openTelemetry: 'sluice.shed.queued',
    unit: '{request}',
    type: 'gauge',
    help: "Requests waiting in the shedder's queue now, by priority class.",
    read: (stats: ShedderStats) => byPriority(stats, 'queued'),
  },
  {
    prometheus: 'sluice_shed_admitted_total',
    openTelemetry: 'sluice.shed.admitted',
    unit: '{request}',
    type: 'counter',
    help: 'Requests granted a ticket, by priority class.',
    read: (stats: ShedderStats) => byPriority(stats, 'admitted'),
  },
  {
    prometheus: 'sluice_shed_refused_total',
    openTelemetry: 'sluice.shed.refused',
    unit: '{request}',
    type: 'counter',
    help: 'Requests refused (503), by priority class.',
    read: (stats: ShedderStats) => byPriority(stats, 'refused'),
  },
  {
    prometheus: 'sluice_shed_dropped_total',
    openTelemetry: 'sluice.shed.dropped',
    unit: '{request}',
    type: 'counter',
    help: 'Tickets released as dropped (a 5xx, a timeout, a client gone), by priority class.',
    read: (stats: ShedderStats) => byPriority(stats, 'dropped'),
  },
  {
    prometheus: 'sluice_shed_latency_seconds',
    openTelemetry: 'sluice.shed.latency',
    unit: 's',
    type: 'gauge',
    help: "The mean latency of the shedder's last sampling window, from grant to release.",
    read: (stats: ShedderStats) => [{ value: stats.latencyMs / 1000, labels: {} }],
  },
] as const;

type Field = 'inFlight' | 'queued' | 'admitted' | 'refused' | 'dropped';

function byPriority(stats: ShedderStats, field: Field): Sample[] {
  return Object.entries(stats.priorities).map(([priority, counts]) => ({
    value: counts[field],
    labels: { priority },
  }));
}

/** Every tracked shedder's samples of one metric, each labelled with its shedder. */
function collect(
  shedders: readonly ShedderView[],
  read: (stats: ShedderStats) => readonly Sample[],
): Sample[] {
  return shedders.flatMap((shedder) =>
    read(shedder.stats()).map((sample) => ({
      value: sample.value,
      labels: { shedder: shedder.name, ...sample.labels },
    })),
  );
}

/** A recorder for `createShedder({ metrics })` whose metrics a prom-client registry serves. */
export interface PrometheusShedMetrics extends ShedMetricsRecorder {}

const PREFIX = /^([a-zA-Z_:][a-zA-Z0-9_:]*)?$/;

/**
 * Metrics of shedders for a prom-client registry, read from each shedder when scraped (a request
 * pays nothing for them): `sluice_shed_limit{shedder}`, `sluice_shed_in_flight{shedder,priority}`,
 * `sluice_shed_queued{shedder,priority}`, `sluice_shed_admitted_total{shedder,priority}`,
 * `sluice_shed_refused_total{shedder,priority}`, `sluice_shed_dropped_total{shedder,priority}` and
 * `sluice_shed_latency_seconds{shedder}` (the last window's mean).
 *
 * @example
 * import { Registry } from 'prom-client';
 * import { prometheusShedMetrics } from 'sluice/metrics';
 * import { createShedder } from 'sluice/shed';
 * const registry = new Registry();
 * const shedder = createShedder({ name: 'api', metrics: prometheusShedMetrics({ registry }) });
 */
export function prometheusShedMetrics(options: {
  readonly registry: PrometheusRegistry;
  readonly prefix?: string;
}): PrometheusShedMetrics {
  const registry = options?.registry;
  if (typeof registry !== 'object' || registry === null || typeof registry.registerMetric !== 'function') {
    throw invalidOption('registry', "a prom-client Registry (new Registry() from 'prom-client')", registry);
  }
  const prefix = options.prefix ?? '';
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    throw invalidOption(
      'prefix',
      'a Prometheus name prefix such as "myapp_" (letters, digits, _ and :)',
      prefix,
    );
  }
  const shedders: ShedderView[] = [];
  for (const definition of SHED_METRICS) {
    const metric: RegistryMetric = {
      name: `${prefix}${definition.prometheus}`,
      help: definition.help,
      type: definition.type,
      aggregator: 'sum',
      get: async () => ({
        name: metric.name,
        help: definition.help,
        type: definition.type,
        aggregator: 'sum',
        values: collect(shedders, definition.read),
      }),
      // Counts live in the shedders: a registry reset does not reach them.
      reset: () => undefined,
    };
    registry.registerMetric(metric as never);
  }
  return { track: (shedder) => void shedders.push(shedder) };
}

/**
 * The same metrics as {@link prometheusShedMetrics} on an OpenTelemetry meter, observed at
 * collection time: `sluice.shed.limit`, `sluice.shed.in_flight`, `sluice.shed.queued`,
 * `sluice.shed.admitted`, `sluice.shed.refused`, `sluice.shed.dropped`, `sluice.shed.latency`.
 *
 * @example
 * import { metrics } from '@opentelemetry/api';
 * import { openTelemetryShedMetrics } from 'sluice/metrics';
 * const shedder = createShedder({ metrics: openTelemetryShedMetrics({ meter: metrics.getMeter('api') }) });
 */
export function openTelemetryShedMetrics(options: {
  readonly meter: OpenTelemetryMeter;
}): ShedMetricsRecorder {
  const meter = options?.meter;
  if (typeof meter !== 'object' || meter === null || typeof meter.addBatchObservableCallback !== 'function') {
    throw invalidOption(
      'meter',
      "an OpenTelemetry Meter (metrics.getMeter('...') from @opentelemetry/api)",
      meter,
    );
  }
  const shedders: ShedderView[] = [];
  const instruments = SHED_METRICS.map((definition) => {
    const options = { description: definition.help, unit: definition.unit };
    return definition.type === 'counter'
      ? meter.createObservableCounter(definition.openTelemetry, options)
      : meter.createObservableGauge(definition.openTelemetry, options);
  });
  meter.addBatchObservableCallback((result) => {
    for (const [index, definition] of SHED_METRICS.entries()) {
      for (const sample of collect(shedders, definition.read)) {
        result.observe(instruments[index] as object, sample.value, sample.labels as Record<string, string>);
      }
    }
  }, instruments);
  return { track: (shedder) => void shedders.push(shedder) };
}
