// takeUpTo() in the metrics: a decision like limit's (it declares so in its operation entry), its
// units those it took (`granted`), in prom-client and OpenTelemetry alike.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { MemoryStore, type Store } from '../../src/index.js';
import { openTelemetryMetrics, prometheusMetrics } from '../../src/metrics/index.js';
import { countedLimiter } from '../helpers/metrics/limiters.js';
import { collect, point } from '../helpers/metrics/otel.js';
import { histogram, outcomes, scrape, skipped } from '../helpers/metrics/scrape.js';

/** A store whose every decision fails, for the failure policy's answers. */
const broken: Store = {
  kind: 'broken',
  decide: () => Promise.reject(new Error('down')),
  reset: () => Promise.resolve(),
  keyFor: (name, identifier) => `${name}:${identifier}`,
};

describe('takeUpTo in the metrics', () => {
  const store = new MemoryStore();
  after(() => store.close());

  test('prom-client: its decisions by outcome, the units it took, near-limit calls, the most denied and store time', async () => {
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const bulk = countedLimiter(store, metrics, 'bulk', 5);
    const shadow = countedLimiter(store, metrics, 'shadow', 2, { enforce: false });
    const open = countedLimiter(broken, metrics, 'open', 5);
    const closed = countedLimiter(broken, metrics, 'closed', 5, { onStoreError: 'deny' });

    // bulk, limit 5: 3 of 3, then 2 of 3 (leaving 0: near the limit), then refused; a limit of 1 beside.
    const granted = [];
    for (let i = 0; i < 3; i++) granted.push((await bulk.takeUpTo('alice', 3)).granted);
    assert.deepEqual(granted, [3, 2, 0]);
    await bulk.limit('bob');
    // shadow, limit 2: 2 of 2 taken, then 1 refused by the policy and let through with nothing taken.
    assert.equal((await shadow.takeUpTo('carol', 2)).granted, 2);
    const shadowed = await shadow.takeUpTo('carol', 1);
    assert.deepEqual([shadowed.allowed, shadowed.granted], [true, 0]);
    // The store fails: `allow` lets the whole request through, `deny` none of it.
    assert.equal((await open.takeUpTo('dave', 4)).granted, 4);
    assert.equal((await closed.takeUpTo('dave', 4)).granted, 0);

    const scraped = await scrape(registry);
    assert.deepEqual(outcomes(scraped, 'bulk'), [3, 1, 0]);
    assert.equal(scraped.value('sluice_units_total{limiter="bulk"}'), 3 + 2 + 0 + 1);
    assert.equal(scraped.value('sluice_near_limit_total{limiter="bulk"}'), 1);
    assert.equal(histogram(scraped, 'bulk').count, 4);
    assert.deepEqual(metrics.topDenied('bulk'), [{ identifier: 'alice', count: 1, error: 0 }]);
    assert.deepEqual(outcomes(scraped, 'shadow'), [1, 0, 1]);
    assert.equal(scraped.value('sluice_units_total{limiter="shadow"}'), 2);
    assert.deepEqual(outcomes(scraped, 'open'), [1, 0, 0]);
    assert.equal(scraped.value('sluice_units_total{limiter="open"}'), 4);
    assert.deepEqual(skipped(scraped, 'open'), [0, 1, 0, 0]);
    assert.deepEqual(outcomes(scraped, 'closed'), [0, 1, 0]);
    assert.equal(scraped.value('sluice_units_total{limiter="closed"}'), 0);
    assert.deepEqual(skipped(scraped, 'closed'), [0, 1, 0, 0]);
    // Not charges.
    assert.equal(scraped.value('sluice_charges_total{limiter="bulk"}'), 0);
  });

  test('OpenTelemetry: the same decisions and units', async () => {
    const otel = await collect();
    const metrics = openTelemetryMetrics({ meter: otel.provider.getMeter('sluice-test') });
    const bulk = countedLimiter(store, metrics, 'bulk-otel', 5);
    const shadow = countedLimiter(store, metrics, 'shadow-otel', 2, { enforce: false });
    for (let i = 0; i < 3; i++) await bulk.takeUpTo('erin', 3);
    await bulk.limit('frank', { cost: 2 });
    await shadow.takeUpTo('gina', 2);
    await shadow.takeUpTo('gina', 1);

    const read = await otel.read();
    const decisions = read.get('sluice.decisions');
    assert.equal(point(decisions, { limiter: 'bulk-otel', outcome: 'allowed' }), 3);
    assert.equal(point(decisions, { limiter: 'bulk-otel', outcome: 'denied' }), 1);
    assert.equal(point(read.get('sluice.units'), { limiter: 'bulk-otel' }), 3 + 2 + 0 + 2);
    assert.equal(point(read.get('sluice.near_limit'), { limiter: 'bulk-otel' }), 1);
    assert.equal(point(decisions, { limiter: 'shadow-otel', outcome: 'allowed' }), 1);
    assert.equal(point(decisions, { limiter: 'shadow-otel', outcome: 'shadow_denied' }), 1);
    assert.equal(point(read.get('sluice.units'), { limiter: 'shadow-otel' }), 2);
    await otel.provider.shutdown();
  });
});
