// prometheusMetrics() on the memory store: every metric's value after known sequences, read from a real registry.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import promClient, { Registry } from 'prom-client';
import { MemoryStore, SluiceError } from '../../src/index.js';
import { decisionMetrics, prometheusMetrics } from '../../src/metrics/index.js';
import { countedLimiter } from '../helpers/metrics/limiters.js';
import { histogram, outcomes, scrape, skipped } from '../helpers/metrics/scrape.js';

describe('prometheusMetrics on the memory store', () => {
  const store = new MemoryStore();
  after(() => store.close());

  test('counts decisions, units, near-limit calls, shadow denials, deny-cache hits and store time per limiter', async () => {
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const api = countedLimiter(store, metrics, 'api', 5);
    const shadow = countedLimiter(store, metrics, 'shadow', 2, { enforce: false });
    const cached = countedLimiter(store, metrics, 'cached', 1, { denyCache: true });

    // Registered limiters are there before their first decision, at 0, with the store up.
    let scraped = await scrape(registry);
    for (const name of ['api', 'shadow', 'cached']) {
      assert.deepEqual(outcomes(scraped, name), [0, 0, 0]);
      assert.deepEqual(skipped(scraped, name), [0, 0, 0, 0]);
      assert.equal(scraped.value(`sluice_store_up{limiter="${name}"}`), 1);
      assert.equal(histogram(scraped, name).count, 0);
    }

    // api, limit 5: seven calls leave 4, 3, 2, 1, 0 and then deny twice; the calls that left 1 and
    // 0 had used 80% of the limit or more.
    for (let i = 0; i < 7; i++) await api.limit('alice');
    await api.peek('alice');
    // A limit per call: 8 of 10 used is near the limit, 7 of 10 is not.
    await api.limit('bob', { cost: 8, limit: 10 });
    await api.limit('carol', { cost: 7, limit: 10 });
    // shadow, limit 2: the third call is denied by the policy and let through.
    const shadowed = [];
    for (let i = 0; i < 3; i++) shadowed.push(await shadow.limit('dave'));
    assert.deepEqual(
      shadowed.map((d) => d.allowed),
      [true, true, true],
    );
    // cached, limit 1: the second call is denied by the store, the third by the deny cache.
    const reasons = [];
    for (let i = 0; i < 3; i++) reasons.push((await cached.limit('eve')).reason);
    assert.deepEqual(reasons, [undefined, undefined, 'cached']);

    scraped = await scrape(registry);
    assert.deepEqual(outcomes(scraped, 'api'), [7, 2, 0]);
    assert.equal(scraped.value('sluice_units_total{limiter="api"}'), 7 + 8 + 7);
    assert.equal(scraped.value('sluice_near_limit_total{limiter="api"}'), 3);
    assert.deepEqual(outcomes(scraped, 'shadow'), [2, 0, 1]);
    assert.deepEqual(outcomes(scraped, 'cached'), [1, 2, 0]);
    assert.equal(scraped.value('sluice_deny_cache_hits_total{limiter="cached"}'), 1);
    assert.equal(scraped.value('sluice_deny_cache_hits_total{limiter="api"}'), 0);
    // The memory store's decisions are timed too: every call the store answered, peek included;
    // the deny cache's answer is not the store's.
    const time = histogram(scraped, 'api');
    assert.equal(time.count, 7 + 1 + 2);
    assert.ok(time.sum > 0 && time.sum < 10, `sum ${time.sum} s`);
    assert.equal(histogram(scraped, 'cached').count, 2);
    for (const name of ['api', 'shadow', 'cached']) {
      assert.deepEqual(skipped(scraped, name), [0, 0, 0, 0]);
      assert.equal(scraped.value(`sluice_store_up{limiter="${name}"}`), 1);
    }
    // Identifiers are never labels; they are in the top-denied list.
    assert.doesNotMatch(scraped.text, /alice|bob|dave|eve/);
    assert.deepEqual(metrics.topDenied('api'), [{ identifier: 'alice', count: 2, error: 0 }]);
    assert.deepEqual(metrics.topDenied('shadow'), [{ identifier: 'dave', count: 1, error: 0 }]);
    assert.deepEqual(metrics.topDenied('cached'), [{ identifier: 'eve', count: 2, error: 0 }]);
    assert.deepEqual(metrics.topDenied('nobody'), []);

    const [snapshot] = metrics.snapshot();
    assert.equal(snapshot?.limiter, 'api');
    assert.equal(snapshot?.policy, 'fixedWindow(limit=5,windowMs=60000)');
    assert.equal(snapshot?.store, 'memory');
    assert.deepEqual(snapshot?.decisions, { allowed: 7, denied: 2, shadow_denied: 0 });
  });

  test('the same counts in JSON and OpenMetrics, under a prefix; registry.resetMetrics() sets the counters to 0', async () => {
    const registry = new Registry<typeof Registry.OPENMETRICS_CONTENT_TYPE>();
    registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
    const metrics = prometheusMetrics({ registry, prefix: 'shop_' });
    const limiter = countedLimiter(store, metrics, 'om', 1);
    await limiter.limit('frank');
    await limiter.limit('frank');
    const text = await registry.metrics();
    assert.match(text, /^# TYPE shop_sluice_decisions counter$/m);
    assert.match(text, /^shop_sluice_decisions_total\{limiter="om",outcome="denied"\} 1$/m);
    assert.match(text, /^shop_sluice_store_decision_seconds_bucket\{limiter="om",le="\+Inf"\} 2$/m);
    assert.match(text, /^# EOF$/m);
    const json = await registry.getMetricsAsJSON();
    const up = json.find((metric) => metric.name === 'shop_sluice_store_up');
    assert.deepEqual(up?.values, [{ value: 1, labels: { limiter: 'om' } }]);

    registry.resetMetrics();
    const reset = await registry.getMetricsAsJSON();
    const decisions = reset.find((metric) => metric.name.startsWith('shop_sluice_decisions'));
    assert.deepEqual(
      decisions?.values.map((v) => v.value),
      [0, 0, 0],
    );
    await limiter.limit('frank');
    assert.match(
      await registry.metrics(),
      /^shop_sluice_decisions_total\{limiter="om",outcome="denied"\} 1$/m,
    );
  });

  test("without a registry the metrics join prom-client's default registry", async () => {
    const metrics = prometheusMetrics({ prefix: 'default_' });
    await metrics.ready;
    try {
      const limiter = countedLimiter(store, metrics, 'dflt', 3);
      await limiter.limit('gina');
      assert.match(
        await promClient.register.metrics(),
        /^default_sluice_decisions_total\{limiter="dflt",outcome="allowed"\} 1$/m,
      );
    } finally {
      for (const metric of promClient.register.getMetricsAsArray()) {
        if (metric.name.startsWith('default_sluice_')) promClient.register.removeSingleMetric(metric.name);
      }
    }
  });

  test('bad options throw a SluiceError naming the option; a name taken in the registry throws', () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ registry: {} }, /^Expected `registry` to be a prom-client Registry/],
      [
        { registry: new Registry(), prefix: 'my-app' },
        /^Expected `prefix` to be a Prometheus name prefix .*got "my-app"/,
      ],
      [
        { hotIdentifiers: -1 },
        /^Expected `hotIdentifiers` to be a whole number from 0 to 1000, got -1 \(number\)\. See sluice\/docs\/errors\.md#err_sluice_invalid_option$/,
      ],
      [
        { hotWindowMs: 1.5 },
        /^Expected `hotWindowMs` to be a whole number of milliseconds from 0 \(count since the start\) to 2147483647, got 1\.5 \(number\)/,
      ],
      [{ registry: new Registry(), buckets: [1] }, /^Unknown option `prometheusMetrics\.buckets`/],
    ];
    for (const [options, message] of cases) {
      assert.throws(
        () => prometheusMetrics(options as never),
        (error: unknown) =>
          error instanceof SluiceError &&
          error.code === 'ERR_SLUICE_INVALID_OPTION' &&
          message.test(error.message),
      );
    }
    const registry = new Registry();
    prometheusMetrics({ registry });
    assert.throws(
      () => prometheusMetrics({ registry }),
      /sluice_decisions_total has already been registered/,
    );
  });

  test('hotIdentifiers sets how many identifiers each limiter keeps; 0 keeps none', async () => {
    const few = prometheusMetrics({ registry: new Registry(), hotIdentifiers: 2 });
    const none = prometheusMetrics({ registry: new Registry(), hotIdentifiers: 0 });
    const a = countedLimiter(store, few, 'few', 1);
    const b = countedLimiter(store, none, 'none', 1);
    for (const id of ['h1', 'h1', 'h1', 'h2', 'h2', 'h3', 'h3', 'h3', 'h3']) {
      await a.limit(id);
      await b.limit(id);
    }
    assert.deepEqual(
      few.topDenied('few').map((entry) => entry.identifier),
      ['h3', 'h1'],
    );
    assert.deepEqual(none.topDenied('none'), []);
  });

  test('the most-denied list covers the last one to two hotWindowMs: an identifier denied before drops out', async () => {
    const metrics = decisionMetrics({ hotWindowMs: 40 });
    const forever = decisionMetrics({ hotWindowMs: 0 });
    const recent = countedLimiter(store, metrics, 'recent', 1);
    const kept = countedLimiter(store, forever, 'kept', 1);
    for (let i = 0; i < 5; i++) {
      await recent.limit('yesterday');
      await kept.limit('yesterday');
    }
    assert.deepEqual(metrics.topDenied('recent'), [{ identifier: 'yesterday', count: 4, error: 0 }]);
    const until = Date.now() + 10_000;
    while (metrics.topDenied('recent').length > 0 && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.deepEqual(metrics.topDenied('recent'), []);
    await recent.limit('now');
    await recent.limit('now');
    assert.deepEqual(metrics.topDenied('recent'), [{ identifier: 'now', count: 1, error: 0 }]);
    // With 0, the list counts since the start.
    assert.deepEqual(forever.topDenied('kept'), [{ identifier: 'yesterday', count: 4, error: 0 }]);
  });
});
