// The recorder interface: a recorder that only has `record` gets a context per decision; one whose
// `register` returns a counter gets the counter's calls instead; histograms stay exact with timing
// sampled one decision in 16.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { Answers } from '../../src/core/answers.js';
import type { DecisionCounter, HookContext, MetricsRecorder } from '../../src/index.js';
import { fixedWindow, MemoryStore } from '../../src/index.js';
import { prometheusMetrics } from '../../src/metrics/index.js';
import { resolveLimiterOptions } from '../../src/options.js';
import { countedLimiter } from '../helpers/metrics/limiters.js';
import { histogram, scrape } from '../helpers/metrics/scrape.js';

describe('the metrics recorder interface', () => {
  const store = new MemoryStore();
  after(() => store.close());

  test('a recorder with record() alone is told each decision with its context', async () => {
    const seen: Array<
      Pick<HookContext, 'name' | 'identifier' | 'operation' | 'cost' | 'source' | 'enforced'>
    > = [];
    const recorder: MetricsRecorder = {
      register() {},
      record(_decision, context) {
        const { name, identifier, operation, cost, source, enforced } = context;
        seen.push({ name, identifier, operation, cost, source, enforced });
      },
      health() {},
    };
    const limiter = countedLimiter(store, recorder, 'plain', 3);
    await limiter.limit('a', { cost: 2 });
    await limiter.peek('a');
    assert.deepEqual(seen, [
      { name: 'plain', identifier: 'a', operation: 'limit', cost: 2, source: 'store', enforced: true },
      { name: 'plain', identifier: 'a', operation: 'peek', cost: 1, source: 'store', enforced: true },
    ]);
  });

  test("a counter returned by register() is called instead of record(), with the call's parts", async () => {
    const counted: string[] = [];
    let recorded = 0;
    const recorder: MetricsRecorder = {
      register(limiter): DecisionCounter {
        return {
          count(decision, call, source) {
            counted.push(
              `${limiter.name}:${call.identifier}:${call.operation}:${call.cost}:${source}:${decision.allowed}`,
            );
          },
        };
      },
      record() {
        recorded++;
      },
      health() {},
    };
    const limiter = countedLimiter(store, recorder, 'fast', 1);
    await limiter.limit('b');
    await limiter.limit('b');
    assert.deepEqual(counted, ['fast:b:limit:1:store:true', 'fast:b:limit:1:store:false']);
    assert.equal(recorded, 0);
  });

  test('with one decision in 16 timed, the store-time histogram still counts every store decision', async () => {
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const limiter = countedLimiter(store, metrics, 'many', 1_000_000);
    for (let i = 0; i < 1000; i++) await limiter.limit(`id-${i % 37}`);
    let time = histogram(await scrape(registry), 'many');
    assert.equal(time.count, 1000);
    assert.ok(time.sum > 0, `sum ${time.sum}`);
    // Counted again after more decisions, and after a reset of the registry's metrics.
    for (let i = 0; i < 21; i++) await limiter.peek('id-1');
    time = histogram(await scrape(registry), 'many');
    assert.equal(time.count, 1021);
    registry.resetMetrics();
    for (let i = 0; i < 5; i++) await limiter.limit('id-2');
    assert.equal(histogram(await scrape(registry), 'many').count, 5);
  });

  test('recorders that only count keep the in-process fast path; a hook or a record()-only recorder leaves it', () => {
    const counting: MetricsRecorder = {
      register: () => ({ count() {} }),
      record() {},
      health() {},
    };
    const recording: MetricsRecorder = { register() {}, record() {}, health() {} };
    const answers = (extra: Record<string, unknown>, recorder?: MetricsRecorder): Answers => {
      const options = resolveLimiterOptions({
        store,
        policy: fixedWindow({ limit: 10, windowMs: 1000 }),
        name: 'fast-path',
        ...extra,
      });
      const made = new Answers(options);
      if (recorder !== undefined) made.attach(recorder);
      return made;
    };
    assert.equal(answers({}).plain, true);
    assert.equal(answers({}, counting).plain, true);
    assert.equal(answers({}, prometheusMetrics({ registry: new Registry() })).plain, true);
    assert.equal(answers({}, recording).plain, false);
    assert.equal(answers({ onDecision() {} }, counting).plain, false);
    assert.equal(answers({ enforce: false }, counting).plain, false);
  });

  test('on the fast path the first decision, then one in 16, is timed for the counters', async () => {
    const timed: boolean[] = [];
    const recorder: MetricsRecorder = {
      register: () => ({
        count(_decision, _call, _source, storeMs) {
          timed.push(!Number.isNaN(storeMs));
        },
      }),
      record() {},
      health() {},
    };
    const limiter = countedLimiter(store, recorder, 'sampled', 1_000);
    for (let i = 0; i < 40; i++) await limiter.limit(`s-${i}`);
    assert.deepEqual(
      timed.flatMap((t, i) => (t ? [i] : [])),
      [0, 16, 32],
    );
  });
});
