// The cost of `overrides: true` on Redis: server µs per decision without it, with it and nothing stored (most
// identifiers), and with a limit stored for every identifier, each policy raced in alternating rounds.

import { performance } from 'node:perf_hooks';
import { createLimiter, type Decision, fixedWindow, gcra, type Policy, RedisStore } from '../src/index.js';
import { BENCH_TIMEOUT_MS, LIMIT, WINDOW_MS } from './contenders.js';
import { count, table } from './format.js';
import { collectGarbage } from './load.js';
import type { Section, Settings } from './section.js';
import { type BenchServer, scriptTotals } from './server.js';

/** How a run reads stored entries: not at all, with none stored, or with a limit stored for every identifier. */
type Mode = 'off' | 'on' | 'stored';
const MODES: readonly Mode[] = ['off', 'on', 'stored'];

interface ModeRun {
  readonly decisions: number;
  readonly perSecond: number;
  /** `usec` of the script commands in INFO commandstats, per decision. */
  readonly scriptUsecPerDecision: number;
  /** Growth of the server process's CPU time, per decision. */
  readonly serverCpuUsecPerDecision: number;
}

export interface OverridesRecord {
  readonly policy: string;
  /** Per mode, one run per round. */
  readonly rounds: Readonly<Record<Mode, ModeRun[]>>;
}

const POLICIES: ReadonlyArray<() => Policy> = [
  () => fixedWindow({ limit: LIMIT, windowMs: WINDOW_MS }),
  () => gcra({ limit: LIMIT, periodMs: WINDOW_MS }),
];

/** Decisions per script call: a tick of this many calls is one coalesced batch. */
const BATCH = 64;

/**
 * One mode's run: batches of BATCH decisions one after another (one script call in flight), so
 * that the server time per decision is the scripts' own and not the queueing of a loaded machine.
 */
async function run(bench: BenchServer, policy: Policy, mode: Mode, settings: Settings): Promise<ModeRun> {
  await bench.flush();
  const store = new RedisStore({ client: bench.client, prefix: 'ov' });
  const overrides = mode !== 'off';
  const limiter = createLimiter({ store, policy, name: 'ov', timeoutMs: BENCH_TIMEOUT_MS, overrides });
  const identifiers = settings.identifiers;
  if (mode === 'stored') {
    // Twice the policy's own: every decision reads a limit and scales the parameters by it.
    for (let i = 0; i < identifiers; i += 1000) {
      const last = Math.min(identifiers, i + 1000);
      await Promise.all(
        Array.from({ length: last - i }, (_, k) => limiter.setLimit(`user:${i + k}`, 2 * LIMIT)),
      );
    }
  }
  let next = 0;
  const batch = (): Promise<Decision[]> =>
    Promise.all(Array.from({ length: BATCH }, () => limiter.limit(`user:${next++ % identifiers}`)));
  // Every identifier has state before the timed part, as in a service that has been up a while.
  while (next < identifiers) await batch();
  collectGarbage();
  await bench.resetStats();
  const cpuBefore = await bench.cpuUsec();
  const started = performance.now();
  let decisions = 0;
  while (performance.now() - started < settings.durationMs) {
    await batch();
    decisions += BATCH;
  }
  const elapsedMs = performance.now() - started;
  const cpu = (await bench.cpuUsec()) - cpuBefore;
  const totals = scriptTotals(await bench.commandStats());
  return {
    decisions,
    perSecond: (decisions * 1000) / elapsedMs,
    scriptUsecPerDecision: totals.usec / decisions,
    serverCpuUsecPerDecision: cpu / decisions,
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** The median over rounds of a mode's figure. */
function figure(record: OverridesRecord, mode: Mode, read: (run: ModeRun) => number): number {
  return median(record.rounds[mode].map(read));
}

export const section: Section<OverridesRecord[]> = {
  name: 'overrides',
  async run({ settings, bench, filtered, log, quick }) {
    if (filtered) return [];
    log('overrides: true');
    const records: OverridesRecord[] = [];
    for (const makePolicy of POLICIES) {
      const policy = makePolicy();
      const rounds: Record<Mode, ModeRun[]> = { off: [], on: [], stored: [] };
      // Alternating rounds: a busy machine moves every mode alike within a round.
      for (let round = 0; round < (quick ? 1 : settings.rounds); round++) {
        for (const mode of MODES) {
          const measured = await run(bench, policy, mode, settings);
          rounds[mode].push(measured);
          log(
            `  ${policy.description} ${mode}: ${measured.scriptUsecPerDecision.toFixed(2)} µs script, ${count(Math.round(measured.perSecond))}/s`,
          );
        }
      }
      records.push({ policy: policy.description, rounds });
    }
    return records;
  },
  render(records) {
    if (records.length === 0) return [];
    const script = (run: ModeRun) => run.scriptUsecPerDecision;
    const cpu = (run: ModeRun) => run.serverCpuUsecPerDecision;
    const rate = (run: ModeRun) => run.perSecond;
    const rows = records.flatMap((record) =>
      MODES.map((mode) => [
        record.policy,
        { off: 'without', on: 'with, nothing stored', stored: 'with, a limit stored for every identifier' }[
          mode
        ],
        figure(record, mode, script).toFixed(2),
        `+${(figure(record, mode, script) - figure(record, 'off', script)).toFixed(2)}`,
        Math.min(...record.rounds[mode].map(script)).toFixed(2),
        figure(record, mode, cpu).toFixed(2),
        count(Math.round(figure(record, mode, rate))),
      ]),
    );
    return [
      '## The cost of `overrides: true`',
      '',
      "A limiter with `overrides: true` reads, in the decision's own script, the identifiers' denials and stored limits (one MGET for the script call's keys, no extra round trip), and with a limit stored computes the policy's parameters from it. " +
        `Each policy ran without the option, with it and nothing stored (most identifiers), and with a limit stored for every identifier, in alternating rounds (medians shown), in batches of ${BATCH} decisions one after another (one script call in flight: the scripts' own time, not a loaded machine's queueing). ` +
        '"script µs/decision" is the `usec` of `INFO commandstats` for the script commands, per decision; "server CPU" the redis-server process\'s CPU time per decision.',
      '',
      table(
        [
          'policy',
          'overrides',
          'script µs/decision',
          'added',
          'best round',
          'server CPU µs/decision',
          'decisions/s',
        ],
        rows,
      ),
      '',
    ];
  },
};
