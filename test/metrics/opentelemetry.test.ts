// openTelemetryMetrics(): the same counts through the OpenTelemetry SDK, read with its in-memory exporter.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { MemoryStore, SluiceError } from '../../src/index.js';
import { openTelemetryMetrics, STORE_SECONDS_BUCKETS } from '../../src/metrics/index.js';
import { countedLimiter } from '../helpers/metrics/limiters.js';
import { collect, point } from '../helpers/metrics/otel.js';

describe('openTelemetryMetrics', () => {
  const store = new MemoryStore();
  after(() => store.close());

  test('decisions, units, near-limit calls, skipped calls, cache hits, store time and health as instruments with units', async () => {
    const otel = await collect();
    const metrics = openTelemetryMetrics({ meter: otel.provider.getMeter('sluice-test') });
    const api = countedLimiter(store, metrics, 'api', 5);
    const shadow = countedLimiter(store, metrics, 'shadow', 1, { enforce: false, denyCache: true });
    for (let i = 0; i < 7; i++) await api.limit('alice', { cost: 1 });
    await api.limit('bob', { cost: 4 });
    for (let i = 0; i < 3; i++) await shadow.limit('carol');

    const read = await otel.read();
    const decisions = read.get('sluice.decisions');
    assert.equal(decisions?.descriptor.unit, '{decision}');
    assert.equal(point(decisions, { limiter: 'api', outcome: 'allowed' }), 6);
    assert.equal(point(decisions, { limiter: 'api', outcome: 'denied' }), 2);
    assert.equal(point(decisions, { limiter: 'shadow', outcome: 'allowed' }), 1);
    assert.equal(point(decisions, { limiter: 'shadow', outcome: 'shadow_denied' }), 2);
    assert.equal(point(read.get('sluice.units'), { limiter: 'api' }), 11);
    // alice left 1 and 0 of 5; bob took 4 of 5 at once.
    assert.equal(point(read.get('sluice.near_limit'), { limiter: 'api' }), 3);
    assert.equal(point(read.get('sluice.deny_cache.hits'), { limiter: 'shadow' }), 1);
    assert.equal(point(read.get('sluice.store.skipped'), { limiter: 'api', reason: 'store_error' }), 0);
    const up = read.get('sluice.store.up');
    assert.equal(up?.descriptor.unit, '1');
    assert.equal(point(up, { limiter: 'api' }), 1);

    const duration = read.get('sluice.store.decision.duration');
    assert.equal(duration?.descriptor.unit, 's');
    const histogram = point<Histogram>(duration, { limiter: 'api' });
    assert.equal(histogram.count, 8);
    assert.deepEqual(histogram.buckets.boundaries, STORE_SECONDS_BUCKETS);
    assert.equal(
      histogram.buckets.counts.reduce((a, b) => a + b, 0),
      8,
    );
    assert.equal(point<Histogram>(duration, { limiter: 'shadow' }).count, 2, 'the cache hit is not timed');
    assert.deepEqual(metrics.topDenied('shadow'), [{ identifier: 'carol', count: 2, error: 0 }]);

    // Counters are cumulative: the next collection adds to them.
    await api.limit('dan');
    assert.equal(
      point((await otel.read()).get('sluice.decisions'), { limiter: 'api', outcome: 'allowed' }),
      7,
    );
    await otel.provider.shutdown();
  });

  test('without a meter it throws a SluiceError naming the option', () => {
    assert.throws(
      () => openTelemetryMetrics({} as never),
      (error: unknown) =>
        error instanceof SluiceError &&
        error.code === 'ERR_SLUICE_INVALID_OPTION' &&
        /^Expected `meter` to be an OpenTelemetry Meter/.test(error.message),
    );
    assert.throws(
      () => openTelemetryMetrics(undefined as never),
      /Expected `openTelemetryMetrics options` to be an options object, got undefined/,
    );
  });
});
