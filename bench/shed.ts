// `npm run bench:shed`: the shedding experiment at full size over real HTTP (four variants side by side), its SVG in
// bench/results/, and the shedder's own cost per acquire + release. Options: --quick (3 s), --no-plot, --cost-only.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createShedder, type ShedderOptions, type Ticket } from '../src/shed/index.js';
import { EXPERIMENT_SHEDDER } from '../test/shed/simulation.js';
import { type ExperimentPlan, type ExperimentRun, figures, runExperiment } from './shed-experiment.js';
import { shedPlot } from './shed-plot.js';

const quick = process.argv.includes('--quick');
const PLAN: ExperimentPlan = {
  slots: 10,
  serviceMs: 50,
  overload: 3,
  durationMs: quick ? 3000 : 15_000,
  halveAtMs: quick ? 1500 : 8000,
  mix: [
    ['critical', 0.1],
    ['default', 0.5],
    ['sheddable', 0.4],
  ],
};
const fixed = (limit: number): ShedderOptions => ({
  ...EXPERIMENT_SHEDDER,
  limit: { algorithm: 'aimd', initial: limit, min: limit, max: limit },
});
const algorithm = process.argv.find((arg) => arg.startsWith('--algorithm='))?.slice(12) ?? 'gradient2';
const VARIANTS: Array<[string, ShedderOptions | undefined]> = [
  [`shed (${algorithm})`, { ...EXPERIMENT_SHEDDER, limit: algorithm as 'gradient2' }],
  ['no shedder', undefined],
  [`fixed ${2 * PLAN.slots}`, fixed(2 * PLAN.slots)],
  [`fixed ${PLAN.slots / 2}`, fixed(PLAN.slots / 2)],
];

const DEFAULT_CLASS = { priority: 'default' } as const;
const SHEDDABLE = { priority: 'sheddable' } as const;

/** A shedder whose limit no call reaches (1000; the allocation count keeps up to 500 tickets), and one that refuses sheddable calls (limit 1, one held). */
function shedders() {
  const open = createShedder({ limit: { algorithm: 'gradient2', initial: 1000, min: 1000, max: 1000 } });
  const full = createShedder({ limit: { algorithm: 'aimd', initial: 1, min: 1, max: 1 } });
  full.acquire({ priority: 'critical' }); // kept: the limit stays full
  return { open, full };
}

/** ns per acquire + release (granted), and per refused acquire, over `count` calls each, after a warm-up. */
function cost(count: number): { grantNs: number; refuseNs: number } {
  const { open, full } = shedders();
  const grants = (n: number) => {
    for (let i = 0; i < n; i += 1) (open.acquire(DEFAULT_CLASS) as Ticket).release();
  };
  const refusals = (n: number) => {
    for (let i = 0; i < n; i += 1) full.acquire(SHEDDABLE);
  };
  grants(200_000);
  refusals(200_000);
  const timed = (run: (n: number) => void) => {
    const start = process.hrtime.bigint();
    run(count);
    return Number(process.hrtime.bigint() - start) / count;
  };
  // The least of five rounds: the machine is shared, and other work only ever adds time.
  let grantNs = Number.POSITIVE_INFINITY;
  let refuseNs = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 5; round += 1) {
    grantNs = Math.min(grantNs, timed(grants));
    refuseNs = Math.min(refuseNs, timed(refusals));
  }
  return { grantNs, refuseNs };
}

/**
 * Bytes allocated per call, from the young generation's growth over `count` calls right after a
 * full collection (a round in which a scavenge ran is discarded). The ticket itself is the one
 * allocation a grant must make: a pooled ticket could be released twice by a holder that kept it.
 */
async function allocations(
  count: number,
): Promise<{ grantBytes: number; refuseBytes: number; ticketBytes: number }> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const youngBytes = () =>
    getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_used_size ?? 0;
  const { open, full } = shedders();
  const held: Ticket[] = [];
  const runs = {
    grant: () => {
      for (let i = 0; i < count; i += 1) (open.acquire(DEFAULT_CLASS) as Ticket).release();
    },
    refuse: () => {
      for (let i = 0; i < count; i += 1) full.acquire(SHEDDABLE);
    },
    // The ticket alone: granted and kept, released after the count.
    ticket: () => {
      for (let i = 0; i < count; i += 1) held.push(open.acquire(DEFAULT_CLASS) as Ticket);
    },
  };
  const perCall = async (run: () => void): Promise<number> => {
    // Warmed up over 300 ms, so that the paths taken once a window closes (every 100 ms) are optimized too.
    for (let warm = 0; warm < 200; warm += 1) {
      run();
      for (const ticket of held.splice(0)) ticket.release();
      if (warm % 3 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    let least = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 40; round += 1) {
      // V8 optimizes on a background thread, late on a busy machine: code not yet optimized boxes numbers.
      await new Promise((resolve) => setTimeout(resolve, 5));
      held.length = 0;
      held.length = count; // the array's storage is allocated before the count starts
      held.length = 0;
      gc();
      const before = youngBytes();
      run();
      const after = youngBytes();
      for (const ticket of held.splice(0)) ticket.release();
      if (after >= before) least = Math.min(least, (after - before) / count);
    }
    return least;
  };
  // The loop and the reading of the heap's statistics cost a few bytes per call of their own.
  const idle = await perCall(() => {
    for (let i = 0; i < count; i += 1) held.length = 0;
  });
  return {
    grantBytes: (await perCall(runs.grant)) - idle,
    refuseBytes: (await perCall(runs.refuse)) - idle,
    ticketBytes: (await perCall(runs.ticket)) - idle,
  };
}

async function printCost(): Promise<void> {
  const { grantNs, refuseNs } = cost(2_000_000);
  const { grantBytes, refuseBytes, ticketBytes } = await allocations(500);
  console.log(
    `shedder's own cost: ${grantNs.toFixed(0)} ns per acquire + release (granted), ${refuseNs.toFixed(0)} ns per refused acquire (least of 5 rounds of 2,000,000)`,
  );
  console.log(
    `allocated per call: ${grantBytes.toFixed(1)} bytes per acquire + release, ${refuseBytes.toFixed(1)} per refusal, ${ticketBytes.toFixed(1)} per ticket kept (young generation, least of 40 rounds of 500, 5 ms apart, less an empty loop's)`,
  );
}

const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  console.log(`${new Date().toISOString()}, load average ${load()} (1, 5, 15 min), ${cpus().length} CPUs`);
  if (process.argv.includes('--cost-only')) {
    await printCost();
    return;
  }
  // The service unloaded (0.3x its capacity, no halving), behind the same shedder: the p99 the bound is 3x of.
  const quiet = { ...PLAN, overload: 0.3, durationMs: 3000, halveAtMs: 3000 };
  const unloaded = figures(await runExperiment('unloaded', quiet, EXPERIMENT_SHEDDER), quiet);
  console.log(`unloaded p99 of the 200s: ${unloaded.p99Ms.toFixed(0)} ms (0.3x capacity for 3 s)`);
  const runs: ExperimentRun[] = [];
  for (const [name, options] of VARIANTS) runs.push(await runExperiment(name, PLAN, options));
  const rows = runs.map((run) => ({ run, f: figures(run, PLAN) }));
  const column = (label: string, value: (row: (typeof rows)[number]) => string) =>
    `${label.padEnd(30)}${rows.map((row) => value(row).padStart(18)).join('')}`;
  const limitAt = (run: ExperimentRun, fromMs: number, toMs: number) => {
    const limits = run.timeline.filter(([ms]) => ms >= fromMs && ms < toMs).map(([, limit]) => limit);
    return limits.length === 0 || Math.max(...limits) === 0
      ? '-'
      : `${Math.min(...limits)}-${Math.max(...limits)}`;
  };
  const capacity = (PLAN.slots * 1000) / PLAN.serviceMs;
  console.log(
    `K=${PLAN.slots} slots, S=${PLAN.serviceMs} ms (${capacity}/s, ${capacity / 2}/s after ${PLAN.halveAtMs} ms), ${PLAN.overload}x load for ${PLAN.durationMs} ms from another process`,
  );
  console.log(column('', (row) => row.run.name));
  console.log(column('goodput (200s/s)', (row) => row.f.goodputPerSecond.toFixed(0)));
  console.log(column('p99 of 200s (ms)', (row) => row.f.p99Ms.toFixed(0)));
  console.log(column('p99, 3 s after halving (ms)', (row) => row.f.p99AfterHalvingMs.toFixed(0)));
  console.log(column('critical served', (row) => `${(100 * row.f.criticalServed).toFixed(1)}%`));
  for (const [name] of PLAN.mix) console.log(column(`refused ${name}`, (row) => String(row.f.refused[name])));
  console.log(column('503s without Retry-After', (row) => String(row.f.refusalsWithoutRetryAfter)));
  console.log(column('other failures', (row) => String(row.f.otherFailures)));
  console.log(column('limit, before halving', (row) => limitAt(row.run, PLAN.halveAtMs / 2, PLAN.halveAtMs)));
  console.log(
    column('limit, 3 s after halving', (row) => limitAt(row.run, PLAN.halveAtMs + 3000, PLAN.durationMs)),
  );
  console.log(`load average after the runs: ${load()}\n`);
  await printCost();
  if (!process.argv.includes('--no-plot') && !quick) {
    const svg = shedPlot(
      runs,
      PLAN.durationMs,
      PLAN.slots,
      'Generated by `npm run bench:shed` (bench/shed.ts); do not edit.',
    );
    // docs/images/shedding.svg is the model's (bench/shed-model.ts): this machine's run goes beside the results.
    writeFileSync(new URL('../../bench/results/shedding-http.svg', import.meta.url), svg);
    console.log('wrote bench/results/shedding-http.svg');
  }
}

await main();
