// The shedder in front of a modelled service (10 slots of 50 ms, halved at 8 s) at 3x its capacity, on a virtual clock.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EXPERIMENT_SHEDDER, percentile, simulate } from './simulation.js';

const BASE = {
  slots: 10,
  serviceMs: 50,
  arrivalsPerSecond: 600,
  durationMs: 15_000,
  halveAtMs: 8000,
} as const;
// Critical is 10% of 3x capacity: 30% of what the service can do; it keeps 40% of the limit.
const PRIORITIES = [{ name: 'critical', reserve: 0.4 }, { name: 'default', reserve: 0.1 }, 'sheddable'];

function limitBetween(limits: readonly [number, number][], fromMs: number, toMs: number): number[] {
  return limits.filter(([ms]) => ms >= fromMs && ms < toMs).map(([, limit]) => limit);
}

describe('3x overload, capacity halved at 8 s', () => {
  test('without a shedder the service queue grows without bound', async () => {
    const outcome = await simulate(BASE);
    assert.ok(outcome.maxQueue > 3000, `queue ${outcome.maxQueue}`);
    assert.ok(percentile(outcome.latenciesMs, 99) > 10_000);
  });
  for (const algorithm of ['gradient2', 'vegas'] as const) {
    test(`${algorithm}: the limit follows the slots, critical is served, latency stays near the service time`, async () => {
      const outcome = await simulate({ ...BASE, shedder: { limit: algorithm, priorities: PRIORITIES } });
      const { served, refused } = outcome;
      const critical =
        (served.critical as number) / ((served.critical as number) + (refused.critical as number));
      assert.ok(critical >= 0.99, `critical served ${critical}`);
      assert.ok((refused.sheddable as number) > (refused.default as number), 'sheddable takes most refusals');
      const goodput = Object.values(served).reduce((sum, count) => sum + count, 0);
      // Capacity: 200/s for 8 s, then 100/s for 7 s.
      assert.ok(goodput >= 0.9 * 2300, `goodput ${goodput}`);
      assert.ok(percentile(outcome.latenciesMs, 99) <= 3 * 55, `p99 ${percentile(outcome.latenciesMs, 99)}`);
      // Within 0.5x to 3x of the slots (the limit counts the reserve critical leaves unused: 40%).
      for (const limit of limitBetween(outcome.limits, 3000, 8000))
        assert.ok(limit >= 5 && limit <= 30, `${limit}`);
      for (const limit of limitBetween(outcome.limits, 11_000, 15_000))
        assert.ok(limit >= 2 && limit <= 15, `${limit}`);
    });
  }
  test('the default classes and gradient2 with a short queue: what the issue asks, the limit within 0.5x-2x of the slots', async () => {
    for (const classes of ['random', 'even'] as const) {
      const outcome = await simulate({ ...BASE, classes, shedder: EXPERIMENT_SHEDDER });
      const { served, refused } = outcome;
      const all = (counts: Record<string, number>) => Object.values(counts).reduce((sum, n) => sum + n, 0);
      // Capacity: 200/s for 8 s, then 100/s for 7 s.
      assert.ok(all(served) >= 0.9 * 2300, `${classes}: goodput ${all(served)}`);
      assert.ok(
        percentile(outcome.latenciesMs, 99) <= 3 * 55,
        `${classes}: p99 ${percentile(outcome.latenciesMs, 99)}`,
      );
      const critical =
        (served.critical as number) / ((served.critical as number) + (refused.critical as number));
      assert.ok(critical >= 0.99, `${classes}: critical served ${critical}`);
      assert.ok((refused.sheddable as number) > all(refused) / 2, `${classes}: ${JSON.stringify(refused)}`);
      for (const limit of limitBetween(outcome.limits, 4000, 8000))
        assert.ok(limit >= 5 && limit <= 20, `${classes}: ${limit} for 10 slots`);
      // Within 3 s of the halving, the limit has followed and the p99 is back under its bound.
      for (const limit of limitBetween(outcome.limits, 11_000, 15_000))
        assert.ok(limit >= 2.5 && limit <= 10, `${classes}: ${limit} for 5 slots`);
      const late = outcome.answers
        .filter(([sentMs, , status]) => status === 200 && sentMs >= 11_000)
        .map(([, , , latencyMs]) => latencyMs);
      assert.ok(percentile(late, 99) <= 3 * 55, `${classes}: p99 from 11 s ${percentile(late, 99)}`);
    }
  });
  test('a fixed limit of 2x the slots queues; of 0.5x wastes capacity', async () => {
    const fixed = (limit: number) =>
      simulate({
        ...BASE,
        shedder: {
          limit: { algorithm: 'aimd', initial: limit, min: limit, max: limit },
          priorities: PRIORITIES,
        },
      });
    const high = await fixed(20);
    const low = await fixed(5);
    const total = (served: Record<string, number>) =>
      Object.values(served).reduce((sum, count) => sum + count, 0);
    // Up to 12 of the lower classes in flight on 5 slots after the halving: 2.4x the service time and more.
    assert.ok(percentile(high.latenciesMs, 99) >= 130, `p99 ${percentile(high.latenciesMs, 99)}`);
    // 5 in flight on 10 slots for 8 s: at most 100/s.
    assert.ok(total(low.served) < 0.8 * 2300, `goodput ${total(low.served)}`);
  });
});
