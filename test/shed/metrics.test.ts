// Shedder metrics through prom-client and the OpenTelemetry SDK: limit, in flight, admitted, refused, dropped, latency.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { openTelemetryShedMetrics, prometheusShedMetrics } from '../../src/metrics/index.js';
import { createShedder, type ShedMetricsRecorder, type Ticket } from '../../src/shed/index.js';
import { collect, point } from '../helpers/metrics/otel.js';

/** A limit of 10 (sheddable to 7): 8 sheddable asked, 7 granted, one dropped after 40 ms, one window closed. */
function busy(metrics: ShedMetricsRecorder) {
  let nowMs = 0;
  const shedder = createShedder({
    name: 'api',
    limit: { algorithm: 'aimd', initial: 10, windowMs: 1, windowSamples: 1 },
    now: () => nowMs,
    metrics,
  });
  const tickets: Ticket[] = [];
  for (let i = 0; i < 8; i += 1) {
    const admission = shedder.acquire({ priority: 'sheddable' });
    if (admission.allowed) tickets.push(admission);
  }
  nowMs = 40;
  (tickets.pop() as Ticket).release({ dropped: true }); // window closes: limit 10 · 0.9 = 9
  return shedder;
}

describe('shedder metrics', () => {
  test('prometheusShedMetrics: gauges and counters by shedder and priority, read when scraped', async () => {
    const registry = new Registry();
    const shedder = busy(prometheusShedMetrics({ registry }));
    const text = await registry.metrics();
    assert.match(text, /^sluice_shed_limit\{shedder="api"\} 9$/m);
    assert.match(text, /^sluice_shed_in_flight\{shedder="api",priority="sheddable"\} 6$/m);
    assert.match(text, /^sluice_shed_in_flight\{shedder="api",priority="critical"\} 0$/m);
    assert.match(text, /^sluice_shed_admitted_total\{shedder="api",priority="sheddable"\} 7$/m);
    assert.match(text, /^sluice_shed_refused_total\{shedder="api",priority="sheddable"\} 1$/m);
    assert.match(text, /^sluice_shed_dropped_total\{shedder="api",priority="sheddable"\} 1$/m);
    assert.match(text, /^sluice_shed_latency_seconds\{shedder="api"\} 0.04$/m);
    assert.equal(shedder.limit, 9);
  });
  test('openTelemetryShedMetrics: the same as observable instruments', async () => {
    const otel = await collect();
    busy(openTelemetryShedMetrics({ meter: otel.provider.getMeter('test') }));
    const metrics = await otel.read();
    assert.equal(point<number>(metrics.get('sluice.shed.limit'), { shedder: 'api' }), 9);
    assert.equal(
      point<number>(metrics.get('sluice.shed.refused'), { shedder: 'api', priority: 'sheddable' }),
      1,
    );
    assert.equal(
      point<number>(metrics.get('sluice.shed.in_flight'), { shedder: 'api', priority: 'sheddable' }),
      6,
    );
    assert.equal(metrics.get('sluice.shed.latency')?.descriptor.unit, 's');
    await otel.provider.shutdown();
  });
});
