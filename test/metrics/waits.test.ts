// Calls waiting for a slot in the metrics: time waited (histogram), calls waiting (gauge), pauses
// taken from upstream answers, on Prometheus and in the snapshot.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { createLimiter, gcra, MemoryStore } from '../../src/index.js';
import { prometheusMetrics } from '../../src/metrics/index.js';
import { throttle } from '../../src/throttle/index.js';
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
