// The dashboard's history: decisions per second from once-a-second samples, and percentiles from histogram buckets.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DecisionHistory, quantileMs } from '../../packages/server/src/dashboard/history.js';
import { MemoryStore } from '../../src/index.js';
import { decisionMetrics, STORE_SECONDS_BUCKETS } from '../../src/metrics/index.js';
import { countedLimiter } from '../helpers/metrics/limiters.js';

describe('dashboard history', () => {
  test('percentiles interpolate within the bucket they fall in, as histogram_quantile does', () => {
    const bounds = [0.001, 0.01, 0.1];
    // 10 below 1 ms, 80 more below 10 ms, 10 more below 100 ms, none above.
    const cumulative = [10, 90, 100, 100];
    const near = (q: number): { estimateMs: number; bucketMs: number } => {
      const result = quantileMs(q, bounds, cumulative);
      assert.ok(result !== null);
      return { estimateMs: Math.round(result.estimateMs * 1e6) / 1e6, bucketMs: result.bucketMs };
    };
    assert.deepEqual(near(0.05), { estimateMs: 0.5, bucketMs: 1 });
    // Rank 50 is the 40th of 80 in (1 ms, 10 ms]: 1 + 9 * 40/80 = 5.5 ms.
    assert.deepEqual(near(0.5), { estimateMs: 5.5, bucketMs: 10 });
    assert.equal(quantileMs(0.99, bounds, cumulative)?.bucketMs, 100);
    // Above the last bound the histogram knows no more than "above it".
    assert.deepEqual(quantileMs(0.99, bounds, [0, 0, 0, 5]), { estimateMs: 100, bucketMs: 100 });
    assert.equal(quantileMs(0.5, bounds, [0, 0, 0, 0]), null);
  });

  test('each interval holds the decisions made in it; the last, unfinished one is included', async () => {
    const store = new MemoryStore();
    const metrics = decisionMetrics();
    const limiter = countedLimiter(store, metrics, 'api', 3);
    let now = 1_000_000;
    const history = new DecisionHistory(metrics, STORE_SECONDS_BUCKETS, () => now);
    try {
      for (let i = 0; i < 2; i++) await limiter.limit('a');
      now += 1000;
      history.tick();
      for (let i = 0; i < 3; i++) await limiter.limit('a');
      now += 1000;
      history.tick();
      await limiter.limit('b');
      const series = history.series().get('api');
      assert.deepEqual(series?.allowed, [2, 1, 1]);
      assert.deepEqual(series?.denied, [0, 2, 0]);
      assert.deepEqual(series?.shadowDenied, [0, 0, 0]);
      assert.equal(series?.latencyCount, 6);
      assert.ok((series?.p50Ms ?? Number.NaN) >= 0);
      assert.equal(history.startMs, 1_000_000);
    } finally {
      history.close();
      store.close();
    }
  });
});
