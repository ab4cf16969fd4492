// Charges in every recorder: how many, the units taken and the units maxDebt cut off, apart from decisions.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import {
  AggregationTemporality,
  type DataPoint,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { Registry } from 'prom-client';
import { MemoryStore } from '../../src/index.js';
import { decisionMetrics, openTelemetryMetrics, prometheusMetrics } from '../../src/metrics/index.js';
import { countedLimiter } from '../helpers/metrics/limiters.js';
import { outcomes, scrape } from '../helpers/metrics/scrape.js';

const store = new MemoryStore();
after(() => store.close());

/** Limit 10, maxDebt 10 by default: 8 taken, then 15 asked of which 12 fit and 3 are cut off, then 1 cut off whole. */
async function charged(limiter: ReturnType<typeof countedLimiter>): Promise<void> {
  await limiter.limit('alice', { cost: 2 });
  await limiter.charge('alice', 6);
  await limiter.charge('alice', 15);
  await limiter.charge('alice', 1);
}

test('prometheusMetrics: sluice_charges_total, sluice_charged_units_total, sluice_debt_cut_off_units_total', async () => {
  const registry = new Registry();
  const metrics = prometheusMetrics({ registry });
  await charged(countedLimiter(store, metrics, 'tokens', 10));
  const scraped = await scrape(registry);
  assert.equal(scraped.value('sluice_charges_total{limiter="tokens"}'), 3);
  assert.equal(scraped.value('sluice_charged_units_total{limiter="tokens"}'), 6 + 12);
  assert.equal(scraped.value('sluice_debt_cut_off_units_total{limiter="tokens"}'), 3 + 1);
  // A charge is not a decision: the one `limit` call is.
  assert.deepEqual(outcomes(scraped, 'tokens'), [1, 0, 0]);
  assert.equal(scraped.value('sluice_units_total{limiter="tokens"}'), 2);
});

test('decisionMetrics snapshot and openTelemetryMetrics count the same', async () => {
  const metrics = decisionMetrics();
  await charged(countedLimiter(store, metrics, 'snap', 10));
  assert.deepEqual(metrics.snapshot()[0]?.charges, { count: 3, units: 18, cutOff: 4 });

  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  const otel = openTelemetryMetrics({ meter: provider.getMeter('charges') });
  await charged(countedLimiter(store, otel, 'otel', 10));
  await reader.forceFlush();
  const read = new Map(
    exporter
      .getMetrics()
      .flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics))
      .map((metric) => [metric.descriptor.name, metric]),
  );
  const value = (name: string) => (read.get(name)?.dataPoints[0] as DataPoint<number> | undefined)?.value;
  assert.deepEqual(
    [value('sluice.charges'), value('sluice.charged.units'), value('sluice.debt.cut_off')],
    [3, 18, 4],
  );
  assert.equal(read.get('sluice.debt.cut_off')?.descriptor.unit, '{unit}');
  await provider.shutdown();
});
