// Cost as work grows: decisions/s and memory per identifier at 10 000, 100 000 and 1 000 000
// identifiers, for the memory store (heap after GC, each run in a process of its own) and Redis; the
// heap of a memory store bounded by maxKeys while new identifiers keep arriving; and a plot.
import { sluiceRedis } from './contenders.js';
import { count, notRun, table } from './format.js';
import { median } from './load.js';
import { MAP_FLOOR, RLF_MEMORY, SLUICE_MEMORY_FIXED_WINDOW } from './memory-contenders.js';
import { lineChart } from './plot.js';
import { inChild, type RunRecord, race } from './race.js';
import { policy } from './redis.js';
import type { Section, Target } from './section.js';
import type { EvictionResult, HeapResult } from './worker.js';

export interface ScalingRow {
  readonly store: 'memory' | 'redis';
  readonly id: string;
  readonly label: string;
  readonly identifiers: number;
  /** Median over the runs. */
  readonly perSecond: number;
  readonly runs: number[];
  /** Heap (and ArrayBuffers) after GC per identifier held; memory store only. */
  readonly bytesPerIdentifier?: number;
}

export interface ScalingResult {
  readonly rows: ScalingRow[];
  readonly eviction: EvictionResult & { readonly id: string; readonly maxKeys: number };
}

const PLOT = 'bench/results/scaling.svg';
const HEAP_TARGET_BYTES = 120;
/** The in-process contenders followed as identifiers grow. */
const MEMORY = [
  [MAP_FLOOR, 'Map fixed window (floor)'],
  [SLUICE_MEMORY_FIXED_WINDOW, 'sluice MemoryStore fixedWindow'],
  ['sluice.memory.gcra', 'sluice MemoryStore gcra'],
  [RLF_MEMORY, 'RateLimiterMemory'],
] as const;
const REDIS = ['fixedWindow', 'gcra'] as const;
const EVICTION_MAX_KEYS = 100_000;

export const scalingSection: Section<ScalingResult> = {
  name: 'scaling',
  async run({ quick, settings, bench, filtered, log }) {
    const rows: ScalingRow[] = [];
    if (filtered) return { rows, eviction: { id: '', maxKeys: 0, samples: [], perSecond: 0 } };
    const sizes = [10_000, 100_000, 1_000_000];
    log('Cost as identifiers grow: memory store (maxKeys = identifiers, so every one is kept)');
    // A quick run follows sluice's fixed window and its floor only.
    const memory = quick
      ? MEMORY.filter(([id]) => id === MAP_FLOOR || id === SLUICE_MEMORY_FIXED_WINDOW)
      : MEMORY;
    for (const identifiers of sizes) {
      for (const [id, label] of memory) {
        const runs: number[] = [];
        for (let round = 0; round < (quick ? 1 : 2); round++) {
          const result = await inChild<{ perSecond: number }>({
            kind: 'race',
            id,
            warmupMs: 300,
            durationMs: quick ? 500 : 1000,
            concurrency: settings.concurrency,
            identifiers,
            precomputed: false,
            maxKeys: identifiers,
          });
          runs.push(result.perSecond);
        }
        const heap = await inChild<HeapResult>({ kind: 'heap', id, identifiers, maxKeys: identifiers });
        log(
          `  ${id.padEnd(30)} ${count(identifiers).padStart(9)} identifiers  ${count(median(runs)).padStart(9)}/s  ${heap.bytesPerIdentifier.toFixed(1)} bytes/identifier`,
        );
        rows.push({
          store: 'memory',
          id,
          label,
          identifiers,
          perSecond: median(runs),
          runs,
          bytesPerIdentifier: heap.bytesPerIdentifier,
        });
      }
    }
    log(`Eviction: maxKeys ${count(EVICTION_MAX_KEYS)}, new identifiers keep arriving`);
    // Heap read at each multiple of maxKeys: from the second on, every arrival evicts one identifier.
    const multiples = quick ? [1, 2, 3, 4] : [1, 2, 4, 6, 8, 10];
    const evicted = await inChild<EvictionResult>({
      kind: 'eviction',
      id: SLUICE_MEMORY_FIXED_WINDOW,
      maxKeys: EVICTION_MAX_KEYS,
      arrivals: EVICTION_MAX_KEYS * (multiples[multiples.length - 1] as number),
      checkpoints: multiples.map((m) => m * EVICTION_MAX_KEYS),
    });
    for (const sample of evicted.samples) {
      log(`  ${count(sample.arrivals).padStart(9)} arrived  heap ${count(sample.heapBytes)} bytes`);
    }
    log('Cost as identifiers grow: Redis');
    for (const identifiers of quick ? sizes.slice(0, 2) : sizes) {
      const contenders = REDIS.map((label) => sluiceRedis(bench.client, policy(label)));
      const summaries = await race(bench, contenders, {
        rounds: 1,
        warmupMs: 0,
        durationMs: quick ? 1000 : 2000,
        concurrency: settings.concurrency,
        identifiers,
        log,
      });
      for (const summary of summaries) {
        rows.push({
          store: 'redis',
          id: summary.id,
          label: `sluice RedisStore ${summary.label}`,
          identifiers,
          perSecond: summary.perSecond,
          runs: summary.runs.map((r: RunRecord) => r.perSecond),
        });
      }
    }
    await bench.flush();
    return { rows, eviction: { ...evicted, id: SLUICE_MEMORY_FIXED_WINDOW, maxKeys: EVICTION_MAX_KEYS } };
  },
  targets({ rows, eviction }) {
    const targets: Target[] = [];
    const largest = rows
      .filter((r) => r.id === SLUICE_MEMORY_FIXED_WINDOW)
      .sort((a, b) => b.identifiers - a.identifiers)[0];
    if (largest?.bytesPerIdentifier !== undefined) {
      targets.push({
        target: `Memory store, fixedWindow: ≤ ${HEAP_TARGET_BYTES} bytes of heap per identifier at ${count(largest.identifiers)} identifiers (after GC, \`user:<n>\` identifiers)`,
        measured: `${largest.bytesPerIdentifier.toFixed(1)} bytes`,
        met: largest.bytesPerIdentifier <= HEAP_TARGET_BYTES,
      });
    }
    const samples = eviction.samples;
    // From twice maxKeys on: the tables have met their size, and a Map keeps the entries it deleted
    // until it next rehashes (at most once more its live entries).
    const first = samples[1];
    const last = samples[samples.length - 1];
    if (first !== undefined && last !== undefined && last !== first) {
      const growth = last.heapBytes / first.heapBytes - 1;
      targets.push({
        target: `Memory store, maxKeys ${count(eviction.maxKeys)}: the heap stays flat while new identifiers keep arriving (≤ 5% growth from ${count(first.arrivals)} to ${count(last.arrivals)} arrivals)`,
        measured: `${count(first.heapBytes)} → ${count(last.heapBytes)} bytes (${(growth * 100).toFixed(1)}%)`,
        met: growth <= 0.05,
      });
    }
    return targets;
  },
  render({ rows, eviction }) {
    if (rows.length === 0) return notRun('Cost as identifiers grow');
    return [
      '## Cost as identifiers grow',
      '',
      'Decisions/s with 200 in flight, round robin over all the identifiers (identifiers built per call), after a warm-up that gives each one state: ' +
        'the memory store with `maxKeys` equal to the identifiers (each kept), each run in a process of its own; Redis on the same server and client as above. ' +
        'Bytes per identifier are the growth of the heap after a full GC (plus ArrayBuffers, where typed arrays keep their contents) once each identifier `user:<n>` has had one decision, divided by the identifiers; they include the identifier strings the store keeps. ' +
        'Redis memory per identifier is in the Redis memory section.',
      '',
      `![decisions/s against identifiers](${PLOT})`,
      '',
      table(
        ['contender', 'identifiers', 'decisions/s', 'heap bytes/identifier'],
        rows.map((r) => [
          r.label,
          count(r.identifiers),
          count(r.perSecond),
          r.bytesPerIdentifier === undefined ? '–' : r.bytesPerIdentifier.toFixed(1),
        ]),
      ),
      '',
      `Eviction at work: a MemoryStore with \`maxKeys: ${count(eviction.maxKeys)}\` (fixedWindow), one decision for each new identifier, heap after GC as they arrive ` +
        `(${count(eviction.perSecond)} decisions/s, one at a time, every one a new identifier and, past maxKeys, an eviction). ` +
        'The heap grows until the tables reach their size: a `Map` keeps deleted entries until it next rehashes; from then on it stays flat.',
      '',
      table(
        ['identifiers arrived', 'heap bytes'],
        eviction.samples.map((s) => [count(s.arrivals), count(s.heapBytes)]),
      ),
      '',
    ];
  },
  files({ rows }, results) {
    const ids = [...new Set(rows.map((r) => r.id))];
    return {
      [PLOT]: lineChart({
        comment: `Generated by npm run bench (bench/scaling.ts) on ${results.date}; do not edit.`,
        title: 'Decisions/s as identifiers grow (200 in flight)',
        xLabel: 'distinct identifiers',
        yLabel: 'decisions/s (log scale)',
        formatX: (x) => (x >= 1e6 ? `${x / 1e6}M` : `${x / 1e3}k`),
        formatY: (y) => (y >= 1e6 ? `${y / 1e6}M` : y >= 1e3 ? `${y / 1e3}k` : String(y)),
        series: ids.map((id) => {
          const points = rows.filter((r) => r.id === id);
          return {
            label: points[0]?.label ?? id,
            dashed: points[0]?.store === 'redis',
            points: points.map((r) => ({ x: r.identifiers, y: r.perSecond })),
          };
        }),
      }),
    };
  },
};
