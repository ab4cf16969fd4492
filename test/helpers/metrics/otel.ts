// Reads an OpenTelemetry recorder's instruments back through the SDK's in-memory exporter, as a collector would.
import assert from 'node:assert/strict';
import {
  AggregationTemporality,
  type DataPoint,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';

/** A meter provider whose metrics are collected on demand (`read()`), cumulatively, by instrument name. */
export async function collect(): Promise<{
  exporter: InMemoryMetricExporter;
  provider: MeterProvider;
  read(): Promise<Map<string, MetricData>>;
}> {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  return {
    exporter,
    provider,
    async read() {
      exporter.reset();
      await reader.forceFlush();
      const metrics = exporter
        .getMetrics()
        .flatMap((resource) => resource.scopeMetrics.flatMap((s) => s.metrics));
      return new Map(metrics.map((metric) => [metric.descriptor.name, metric]));
    },
  };
}

/** The value of the data point with exactly these attributes. */
export function point<T>(metric: MetricData | undefined, attributes: Record<string, string>): T {
  assert.ok(metric !== undefined);
  const found = (metric.dataPoints as DataPoint<T>[]).find(
    (p) => JSON.stringify(p.attributes) === JSON.stringify(attributes),
  );
  assert.ok(found !== undefined, `no point ${JSON.stringify(attributes)} in ${metric.descriptor.name}`);
  return found.value;
}
