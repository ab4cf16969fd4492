// A concurrency limiter's lease instruments, scraped: slots in use, refused acquisitions, leases that lapsed unreleased.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { concurrency, createLimiter, MemoryStore, type MetricsRecorder } from '../../src/index.js';
import { openTelemetryMetrics, prometheusMetrics } from '../../src/metrics/index.js';
import { countedLimiter } from '../helpers/metrics/limiters.js';
import { collect, point } from '../helpers/metrics/otel.js';
import { scrape } from '../helpers/metrics/scrape.js';

// A long lease on a clock the test moves: the gauge holds an identifier's slots until its last lease
// would lapse by the wall clock (resetMs after the decision), far beyond the test's run.
const LEASE_MS = 60_000;

interface Reading {
  readonly inUse: number;
  readonly refused: number;
  readonly expired: number;
}

/**
 * Limit 2: two leases taken, a third refused, one released, the other left to lapse on the
 * limiter's clock until the next acquisition reclaims it; the exporter read after each step.
 */
async function acquireRefuseReleaseLapse(
  metrics: MetricsRecorder,
  read: () => Promise<Reading>,
): Promise<void> {
  // A store of its own: each exporter's run starts with no lease held.
  const store = new MemoryStore();
  try {
    await steps(store, metrics, read);
  } finally {
    store.close();
  }
}

async function steps(
  store: MemoryStore,
  metrics: MetricsRecorder,
  read: () => Promise<Reading>,
): Promise<void> {
  let now = 1_800_000_000_000;
  const limiter = createLimiter({
    store,
    policy: concurrency({ limit: 2, leaseMs: LEASE_MS }),
    name: 'exports',
    clock: () => now,
    metrics,
  });
  assert.deepEqual(await read(), { inUse: 0, refused: 0, expired: 0 });

  const first = await limiter.limit('acme');
  const second = await limiter.limit('acme');
  assert.ok(first.lease !== undefined && second.lease !== undefined);
  assert.deepEqual(await read(), { inUse: 2, refused: 0, expired: 0 });

  const third = await limiter.limit('acme');
  assert.equal(third.allowed, false);
  assert.deepEqual(await read(), { inUse: 2, refused: 1, expired: 0 });

  assert.equal((await limiter.release('acme', second.lease)).released, true);
  assert.deepEqual(await read(), { inUse: 1, refused: 1, expired: 0 }, 'a released lease did not expire');

  // The first lease is never released. Past its end, but within the key's life (one more lease
  // length), the next acquisition finds it lapsed and frees its slot.
  now += LEASE_MS * 1.5;
  const next = await limiter.limit('acme');
  assert.equal(next.allowed, true);
  assert.equal(next.reclaimed, 1);
  assert.deepEqual(await read(), { inUse: 1, refused: 1, expired: 1 }, 'the new lease in use');
}

describe('lease instruments of a concurrency limiter', () => {
  const store = new MemoryStore();
  after(() => store.close());

  test('prometheusMetrics: sluice_lease_slots_in_use, refusals in sluice_decisions_total, sluice_lease_slots_expired_total', async () => {
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    // A limiter without leases has no lease series.
    countedLimiter(store, metrics, 'rate', 5);
    const read = async (): Promise<Reading> => {
      const scraped = await scrape(registry);
      assert.equal(scraped.series('sluice_lease_slots').size, 2, 'one series each, for exports only');
      return {
        inUse: scraped.value('sluice_lease_slots_in_use{limiter="exports"}'),
        refused: scraped.value('sluice_decisions_total{limiter="exports",outcome="denied"}'),
        expired: scraped.value('sluice_lease_slots_expired_total{limiter="exports"}'),
      };
    };
    await acquireRefuseReleaseLapse(metrics, read);

    // registry.resetMetrics() sets the counter to 0; the gauge is what is held now.
    registry.resetMetrics();
    assert.deepEqual(await read(), { inUse: 1, refused: 0, expired: 0 });
  });

  test('openTelemetryMetrics: sluice.lease.slots.in_use, refusals in sluice.decisions, sluice.lease.slots.expired', async () => {
    const otel = await collect();
    const metrics = openTelemetryMetrics({ meter: otel.provider.getMeter('leases') });
    countedLimiter(store, metrics, 'rate', 5);
    const limiter = { limiter: 'exports' };
    const read = async (): Promise<Reading> => {
      const collected = await otel.read();
      const inUse = collected.get('sluice.lease.slots.in_use');
      const expired = collected.get('sluice.lease.slots.expired');
      assert.equal(inUse?.descriptor.unit, '{slot}');
      assert.deepEqual(
        [inUse, expired].map((metric) => metric?.dataPoints.map((p) => p.attributes)),
        [[limiter], [limiter]],
        'one point each, for exports only',
      );
      return {
        inUse: point(inUse, limiter),
        refused: point(collected.get('sluice.decisions'), { ...limiter, outcome: 'denied' }),
        expired: point(expired, limiter),
      };
    };
    await acquireRefuseReleaseLapse(metrics, read);
    await otel.provider.shutdown();
  });
});
