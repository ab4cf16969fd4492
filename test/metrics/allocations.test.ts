// What an in-process decision allocates, in bytes (not in time, which a shared machine cannot hold
// still): a limiter on the memory store takes the short path, where the twin writes its outcome into
// an object the store reuses, and prometheusMetrics() keeps that path. Measured in a child process with
// a young generation large enough that no collection runs during the count. Measured on the short
// path of a fixed window, without a recorder and with prometheusMetrics(): Node.js 20.20.2 36.8 and
// 39.7 bytes per decision, Node.js 26.12.1 (the CI's full leg) 89.1 and 95.6 (and 89.1 and 105.2 in one
// .ci/run: the with-metrics figure varies from process to process on Node.js 26) (before the reused outcome: 140.9 and 143.8, 193.2 and 209.1); gcra and tokenBucket 21-28 on 20,
// 75-80 on 26. An Outcome of the twin's, a label string or an object made per decision would add 32
// bytes or more.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

const SCRIPT = `
const [index, metricsModule, mode, algorithm = 'fixedWindow'] = process.argv.slice(1);
const { createLimiter, MemoryStore, fixedWindow, gcra, tokenBucket } = await import(index);
const { prometheusMetrics } = await import(metricsModule);
const { Registry } = await import('prom-client');
const v8 = await import('node:v8');
const metrics = mode === 'on' ? { metrics: prometheusMetrics({ registry: new Registry() }) } : {};
const limiter = createLimiter({
  store: new MemoryStore(),
  policy:
    algorithm === 'gcra'
      ? gcra({ limit: 1_000_000, periodMs: 60_000 })
      : algorithm === 'tokenBucket'
        ? tokenBucket({ capacity: 1_000_000, refillPerSecond: 1000 })
        : fixedWindow({ limit: 1_000_000, windowMs: 60_000 }),
  name: 'allocations',
  ...metrics,
});
const ids = Array.from({ length: 1000 }, (_, i) => 'user:' + i);
const run = async (n) => { for (let i = 0; i < n; i++) await limiter.limit(ids[i % 1000]); };
// Young objects only: what the compiler makes meanwhile lives elsewhere.
const young = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_used_size;
await run(100_000);
globalThis.gc();
const before = young();
await run(20_000);
process.stdout.write(String((young() - before) / 20_000));
`;

/**
 * Bytes per decision, the least of three processes: what else a process allocates meanwhile (a timer,
 * a late optimization on a busy machine) only adds, while an allocation per decision is in every process.
 */
function bytesPerDecision(mode: 'off' | 'on', algorithm = 'fixedWindow'): number {
  return Math.min(measure(mode, algorithm), measure(mode, algorithm), measure(mode, algorithm));
}

function measure(mode: 'off' | 'on', algorithm: string): number {
  const out = execFileSync(
    process.execPath,
    [
      '--expose-gc',
      '--max-semi-space-size=64',
      '--input-type=module',
      '-e',
      SCRIPT,
      new URL('../../src/index.js', import.meta.url).href,
      new URL('../../src/metrics/index.js', import.meta.url).href,
      mode,
      algorithm,
    ],
    { encoding: 'utf8' },
  );
  return Number(out);
}

test('prometheusMetrics() adds at most 24 bytes of allocation to an in-process decision', () => {
  const off = bytesPerDecision('off');
  const on = bytesPerDecision('on');
  assert.ok(off > 0 && Number.isFinite(on), `off ${off}, on ${on}`);
  // Off the fast path, a counted decision allocated about 19 bytes more (its store-time timing and the
  // full path's objects); on it, one timing in 16 boxes a number.
  assert.ok(on - off <= 24, `${on.toFixed(1)} bytes per decision with metrics, ${off.toFixed(1)} without`);
});

test('the short path allocates no outcome of its own: at most 120 bytes per decision', () => {
  // A new Outcome per decision (the twin's, before the store reused one) cost about 100 bytes: 141
  // and 193 per fixed-window decision on Node.js 20 and 26, where 37 and 89 are measured now.
  for (const algorithm of ['fixedWindow', 'gcra', 'tokenBucket']) {
    const off = bytesPerDecision('off', algorithm);
    assert.ok(off > 0 && off <= 120, `${algorithm}: ${off.toFixed(1)} bytes per decision`);
  }
});
