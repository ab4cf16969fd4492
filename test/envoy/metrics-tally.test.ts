// The Envoy service's per-call metrics are plain numbers read at scrape time: a call updates no prom-client metric
// (prom-client hashes a metric's labels on every update), and the page still shows what each call added.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as client from 'prom-client';
import { EnvoyMetrics } from '../../packages/server/src/envoy/metrics.js';

/** A sample's value on a page in Prometheus's text format, by its name and labels as written; undefined when absent. */
function sample(page: string, series: string): number | undefined {
  const line = page.split('\n').find((text) => text.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const DOMAIN = 'shop';

function outcome(hits: number, before: number, over: boolean, shadow = false) {
  const parts = ['tenant'];
  return { domain: DOMAIN, statsParts: parts, ruleParts: parts, hits, limit: 10, before, over, shadow };
}

describe('the Envoy metrics on a registry', () => {
  test('a call and its descriptors update no prom-client metric; the page reads the counts', async () => {
    const registry = new client.Registry();
    const metrics = new EnvoyMetrics(client, registry);
    const updates: string[] = [];
    const spied = [
      [client.Counter.prototype, 'inc'],
      [client.Histogram.prototype, 'observe'],
      [client.Histogram.prototype, 'startTimer'],
    ] as const;
    const originals = spied.map(([prototype, name]) => {
      const original = (prototype as unknown as Record<string, (...args: unknown[]) => unknown>)[name];
      (prototype as unknown as Record<string, unknown>)[name] = function (this: unknown, ...args: unknown[]) {
        updates.push(name);
        return original?.apply(this, args);
      };
      return original;
    });
    try {
      for (let i = 0; i < 100; i++) {
        const done = metrics.call('ShouldRateLimit');
        // Within, 7 -> 9 of 10 (past 80%: 1 hit near), then over: 3 hits refused.
        metrics.descriptor(outcome(2, 7, false));
        metrics.descriptor(outcome(3, 9, true));
        done();
      }
    } finally {
      spied.forEach(([prototype, name], i) => {
        (prototype as unknown as Record<string, unknown>)[name] = originals[i];
      });
    }
    assert.deepEqual(updates, []);
    const page = await registry.metrics();
    const labels = `{domain="${DOMAIN}",key1="tenant",key2=""}`;
    assert.equal(sample(page, `ratelimit_service_rate_limit_total_hits_total${labels}`), 500);
    assert.equal(sample(page, `ratelimit_service_rate_limit_within_limit_total${labels}`), 200);
    assert.equal(sample(page, `ratelimit_service_rate_limit_near_limit_total${labels}`), 100);
    assert.equal(sample(page, `ratelimit_service_rate_limit_over_limit_total${labels}`), 300);
    // No call was in shadow mode: the family has no series.
    assert.equal(sample(page, `ratelimit_service_rate_limit_shadow_mode_total${labels}`), undefined);
    const method = '{grpc_method="ShouldRateLimit"}';
    assert.equal(sample(page, `ratelimit_service_total_requests_total${method}`), 100);
    assert.equal(sample(page, `ratelimit_service_response_time_seconds_count${method}`), 100);
    assert.equal(
      sample(page, 'ratelimit_service_response_time_seconds_bucket{le="+Inf",grpc_method="ShouldRateLimit"}'),
      100,
    );
    assert.ok((sample(page, `ratelimit_service_response_time_seconds_sum${method}`) ?? -1) >= 0);
  });

  test('services on one registry count together; resetMetrics() sets every count to 0', async () => {
    const registry = new client.Registry();
    const first = new EnvoyMetrics(client, registry);
    const second = new EnvoyMetrics(client, registry);
    first.descriptor(outcome(1, 0, false, false));
    second.descriptor(outcome(4, 0, true, true));
    second.call('ShouldRateLimit')();
    const labels = `{domain="${DOMAIN}",key1="tenant",key2=""}`;
    let page = await registry.metrics();
    assert.equal(sample(page, `ratelimit_service_rate_limit_total_hits_total${labels}`), 5);
    assert.equal(sample(page, `ratelimit_service_rate_limit_shadow_mode_total${labels}`), 4);
    registry.resetMetrics();
    page = await registry.metrics();
    assert.equal(sample(page, `ratelimit_service_rate_limit_total_hits_total${labels}`), undefined);
    assert.equal(sample(page, 'ratelimit_service_total_requests_total{grpc_method="ShouldRateLimit"}'), 0);
    assert.equal(
      sample(page, 'ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}'),
      0,
    );
    first.descriptor(outcome(2, 0, false));
    page = await registry.metrics();
    assert.equal(sample(page, `ratelimit_service_rate_limit_total_hits_total${labels}`), 2);
  });
});
