// Calls waiting for a slot in the metrics: time waited (histogram), calls waiting (gauge), pauses
// taken from upstream answers, on Prometheus and in the snapshot; and the time throttled calls waited
// for a lease of their concurrency limiter, on Prometheus, OpenTelemetry and the snapshot.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { Registry } from 'prom-client';
import { concurrency, createLimiter, gcra, MemoryStore, type MetricsRecorder } from '../../src/index.js';
import { openTelemetryMetrics, prometheusMetrics, WAIT_SECONDS_BUCKETS } from '../../src/metrics/index.js';
import { throttle } from '../../src/throttle/index.js';
import { collect, point } from '../helpers/metrics/otel.js';
import { scrape } from '../helpers/metrics/scrape.js';

describe('metrics of calls waiting for a slot', () => {
  test('time waited, calls waiting now and pauses from upstream answers, per limiter', async () => {
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const store = new MemoryStore();
    // 4 per second, one at a time: the second call waits for its slot 250 ms after the first's
    // (less the moment between the two calls).
    const limiter = createLimiter({
      store,
      policy: gcra({ limit: 4, periodMs: 1000, burst: 1 }),
      name: 'partner',
      metrics,
    });
    let scraped = await scrape(registry);
    assert.equal(scraped.value('sluice_waiting{limiter="partner"}'), 0);
    assert.equal(scraped.value('sluice_wait_seconds_count{limiter="partner"}'), 0);

    const first = await limiter.wait('a');
    const second = limiter.wait('a');
    scraped = await scrape(registry);
    assert.equal(scraped.value('sluice_waiting{limiter="partner"}'), 1, 'one call waits now');
    const waited = await second;
    scraped = await scrape(registry);
    assert.equal(scraped.value('sluice_waiting{limiter="partner"}'), 0);
    assert.equal(scraped.value('sluice_wait_seconds_count{limiter="partner"}'), 2);
    // The second waited for its slot: above the 100 ms bound, where the first may be.
    assert.ok(waited.waitedMs > 100, `${waited.waitedMs} ms`);
    assert.ok(scraped.value('sluice_wait_seconds_bucket{limiter="partner",le="0.1"}') <= 1);
    assert.equal(scraped.value('sluice_wait_seconds_bucket{limiter="partner",le="+Inf"}'), 2);
    const sumMs = scraped.value('sluice_wait_seconds_sum{limiter="partner"}') * 1000;
    assert.ok(Math.abs(sumMs - first.waitedMs - waited.waitedMs) < 1e-6, 'the sum is what the two waited');

    // An upstream that answers 429 with Retry-After: 1 pauses the key once; the call is made again.
    const calls = throttle({ limiter, retries: 1 });
    let answers = 0;
    const answer = await calls.run(() => {
      answers++;
      return answers === 1
        ? new Response('slow down', { status: 429, headers: { 'retry-after': '1' } })
        : new Response('ok');
    });
    assert.equal(answer.status, 200);
    scraped = await scrape(registry);
    assert.equal(scraped.value('sluice_upstream_pauses_total{limiter="partner"}'), 1);
    const [snapshot] = metrics.snapshot();
    assert.equal(snapshot?.waits.upstreamPauses, 1);
    assert.equal(snapshot?.waits.waiting, 0);
    assert.equal(snapshot?.waits.waitSeconds.count, 4, 'two waits, and the throttled call went twice');
    store.close();
  });
});

describe('metrics of throttled calls waiting for a lease', () => {
  /**
   * A throttle with a rate never in the way and one slot of a concurrency limiter, both counted by
   * `metrics`: the first call holds the slot 300 ms past the moment the second was refused one.
   */
  async function secondWaitsForTheFirst(metrics: MetricsRecorder, refused: () => number): Promise<void> {
    const store = new MemoryStore();
    const rate = createLimiter({
      store,
      policy: gcra({ limit: 1000, periodMs: 1000, burst: 20 }),
      name: 'partner',
      metrics,
    });
    const slots = createLimiter({
      store,
      policy: concurrency({ limit: 1, leaseMs: 60_000 }),
      name: 'partner-in-flight',
      metrics,
    });
    const calls = throttle({ limiter: rate, concurrency: slots });
    let release = (): void => undefined;
    const first = calls.run(() => new Promise<void>((resolve) => (release = resolve)));
    const second = calls.run(() => 'second');
    while (refused() < 1) await delay(2);
    // The second call is waiting for the lease: it waits at least this long more.
    await delay(300);
    release();
    await first;
    assert.equal(await second, 'second');
    assert.equal((await slots.peek('default')).remaining, 1, 'the slot came back');
    store.close();
  }

  test('on Prometheus and the snapshot: the time waited for a lease after the rate slot, beside the rate wait', async () => {
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const inFlight = () => metrics.snapshot().find((m) => m.limiter === 'partner-in-flight');
    await secondWaitsForTheFirst(metrics, () => inFlight()?.decisions.denied ?? 0);
    const scraped = await scrape(registry);
    const series = 'sluice_lease_wait_seconds';
    assert.equal(scraped.value(`${series}_count{limiter="partner-in-flight"}`), 2);
    assert.equal(
      scraped.value(`${series}_bucket{limiter="partner-in-flight",le="0.25"}`),
      1,
      'the first got its lease at once, the second after the 300 ms the first held it',
    );
    assert.ok(scraped.value(`${series}_sum{limiter="partner-in-flight"}`) >= 0.3);
    assert.equal(scraped.series(`${series}_count{limiter="partner"}`).size, 0, 'only concurrency limiters');
    // The rate wait is apart: both calls had their rate slot at once.
    assert.equal(scraped.value('sluice_wait_seconds_count{limiter="partner"}'), 2);
    assert.equal(scraped.value('sluice_wait_seconds_bucket{limiter="partner",le="0.25"}'), 2);
    assert.equal(inFlight()?.leases?.waitSeconds.count, 2);
    assert.ok((inFlight()?.leases?.waitSeconds.sum ?? 0) >= 0.3);
  });

  test('on OpenTelemetry: sluice.lease.wait.duration, in seconds, on the wait bounds', async () => {
    const otel = await collect();
    const metrics = openTelemetryMetrics({ meter: otel.provider.getMeter('sluice-test') });
    await secondWaitsForTheFirst(
      metrics,
      () => metrics.snapshot().find((m) => m.limiter === 'partner-in-flight')?.decisions.denied ?? 0,
    );
    const duration = (await otel.read()).get('sluice.lease.wait.duration');
    assert.equal(duration?.descriptor.unit, 's');
    const histogram = point<Histogram>(duration, { limiter: 'partner-in-flight' });
    assert.equal(histogram.count, 2);
    assert.deepEqual(histogram.buckets.boundaries, WAIT_SECONDS_BUCKETS);
    assert.ok((histogram.sum ?? 0) >= 0.3);
    await otel.provider.shutdown();
  });
});
