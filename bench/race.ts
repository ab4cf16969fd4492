// Races contenders in interleaved rounds: each run starts from an empty database, warms up, then
// measures decisions per second, latency, and the server's work per decision.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Contender } from './contenders.js';
import { collectGarbage, type LoadResult, median, runLoad } from './load.js';
import { type BenchServer, scriptTotals } from './server.js';
import type { Job } from './worker.js';

export interface RaceOptions {
  readonly rounds: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly concurrency: number;
  /** Distinct identifiers, built per call (`user:<n>`). */
  readonly identifiers: number;
  readonly log: (line: string) => void;
  /** Measures one run elsewhere (the in-process stores run in a child process each); Redis by default. */
  readonly measure?: (contender: Contender, round: number) => Promise<RunRecord>;
}

const run = promisify(execFile);

/** One measured run of one contender. */
export interface RunRecord extends LoadResult {
  readonly round: number;
  /** Script calls the server counted (EVAL, EVALSHA, FCALL). */
  readonly scriptCalls: number;
  /** Server time inside those calls (INFO commandstats `usec`), per decision. */
  readonly scriptUsecPerDecision: number;
  /** The redis-server process's CPU time (user + system, so parsing and sockets too), per decision. */
  readonly serverCpuUsecPerDecision: number;
  /** Decisions the store did not make (timeouts, store errors): 0 in a fair run. */
  readonly notFromStore: number;
}

/** The median of each figure over the rounds. */
export interface Summary {
  readonly id: string;
  readonly library: string;
  readonly label: string;
  readonly kind: string;
  readonly perSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly scriptUsecPerDecision: number;
  readonly serverCpuUsecPerDecision: number;
  readonly decisionsPerCall: number;
  readonly allowedShare: number;
  /** Decisions the store did not make, summed over the rounds. */
  readonly notFromStore: number;
  readonly runs: RunRecord[];
}

async function measure(
  bench: BenchServer,
  contender: Contender,
  round: number,
  options: RaceOptions,
): Promise<RunRecord> {
  await bench.flush();
  await contender.prepare?.();
  const decider = contender.setup();
  const load = { concurrency: options.concurrency, identifiers: options.identifiers };
  // Every identifier has state before the measured run: creating keys costs more than updating them.
  await runLoad(decider, { ...load, durationMs: options.warmupMs, minDecisions: options.identifiers });
  collectGarbage();
  await bench.resetStats();
  const cpuBefore = await bench.cpuUsec();
  const undecidedBefore = contender.notFromStore?.() ?? 0;
  const result = await runLoad(decider, { ...load, durationMs: options.durationMs });
  const undecided = (contender.notFromStore?.() ?? 0) - undecidedBefore;
  const cpuAfter = await bench.cpuUsec();
  const totals = scriptTotals(await bench.commandStats());
  return {
    ...result,
    round,
    scriptCalls: totals.calls,
    scriptUsecPerDecision: totals.usec / result.decisions,
    serverCpuUsecPerDecision: (cpuAfter - cpuBefore) / result.decisions,
    notFromStore: undecided,
  };
}

/** Runs a job in a child process of its own (bench/worker.ts) and returns what it printed. */
export async function inChild<T>(job: Job): Promise<T> {
  const worker = fileURLToPath(new URL('./worker.js', import.meta.url));
  const { stdout } = await run(process.execPath, ['--expose-gc', worker, JSON.stringify(job)], {
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout) as T;
}

/** Runs one in-process contender in a child process: one round of the race. */
export async function measureInChild(
  contender: Contender,
  round: number,
  options: RaceOptions & {
    readonly precomputed: boolean;
    readonly maxKeys?: number;
    readonly module?: string;
  },
): Promise<RunRecord> {
  const result = await inChild<LoadResult>({
    kind: 'race',
    id: contender.id,
    warmupMs: options.warmupMs,
    durationMs: options.durationMs,
    concurrency: options.concurrency,
    identifiers: options.identifiers,
    precomputed: options.precomputed,
    ...(options.maxKeys === undefined ? {} : { maxKeys: options.maxKeys }),
    ...(options.module === undefined ? {} : { module: options.module }),
  });
  return {
    ...result,
    round,
    scriptCalls: 0,
    scriptUsecPerDecision: 0,
    serverCpuUsecPerDecision: 0,
    notFromStore: 0,
  };
}

function describe(id: string, record: RunRecord): string {
  const speed = `  round ${record.round + 1} ${id.padEnd(34)} ${Math.round(record.perSecond).toString().padStart(8)}/s`;
  if (record.p50Ms === null || record.p99Ms === null) return speed;
  return (
    `${speed}  p50 ${record.p50Ms.toFixed(2)} ms  p99 ${record.p99Ms.toFixed(2)} ms` +
    `  script ${record.scriptUsecPerDecision.toFixed(2)} µs  cpu ${record.serverCpuUsecPerDecision.toFixed(2)} µs` +
    `  ${(record.decisions / Math.max(1, record.scriptCalls)).toFixed(1)}/call` +
    (record.notFromStore > 0 ? `  ${record.notFromStore} NOT FROM THE STORE` : '')
  );
}

/**
 * Runs every contender once per round, rotating the order each round so that no contender always
 * runs first (cold) or last (after the machine has warmed), and reports medians over the rounds.
 */
export async function race(
  bench: BenchServer,
  contenders: readonly Contender[],
  options: RaceOptions,
): Promise<Summary[]> {
  const runs = new Map<string, RunRecord[]>(contenders.map((c) => [c.id, []]));
  for (let round = 0; round < options.rounds; round++) {
    const shift = (round * Math.max(1, Math.floor(contenders.length / options.rounds))) % contenders.length;
    const order = [...contenders.slice(shift), ...contenders.slice(0, shift)];
    for (const contender of order) {
      const record =
        options.measure === undefined
          ? await measure(bench, contender, round, options)
          : await options.measure(contender, round);
      runs.get(contender.id)?.push(record);
      options.log(describe(contender.id, record));
    }
  }
  return contenders.map((contender) => {
    const records = runs.get(contender.id) ?? [];
    const pick = (f: (r: RunRecord) => number) => median(records.map(f));
    return {
      id: contender.id,
      library: contender.library,
      label: contender.label,
      kind: contender.kind,
      perSecond: pick((r) => r.perSecond),
      p50Ms: pick((r) => r.p50Ms ?? Number.NaN),
      p99Ms: pick((r) => r.p99Ms ?? Number.NaN),
      scriptUsecPerDecision: pick((r) => r.scriptUsecPerDecision),
      serverCpuUsecPerDecision: pick((r) => r.serverCpuUsecPerDecision),
      decisionsPerCall: pick((r) => r.decisions / Math.max(1, r.scriptCalls)),
      allowedShare: pick((r) => r.allowed / r.decisions),
      notFromStore: records.reduce((sum, r) => sum + r.notFromStore, 0),
      runs: records,
    };
  });
}
