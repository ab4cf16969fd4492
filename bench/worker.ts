// Runs one in-process measurement in a process of its own, so that it pays for no other contender's
// heap, timers (RateLimiterMemory keeps one per key) or compiled code; prints its result as JSON.
//   node --expose-gc build/bench/worker.js '<job as JSON>'
import type { Contender } from './contenders.js';
import { collectGarbage, precomputedIdentifiers, runLoad } from './load.js';
import { memoryContenders } from './memory-contenders.js';

/** A run of decisions/s: warm-up over every identifier twice, then the measured run. */
export interface RaceJob {
  readonly kind: 'race';
  readonly id: string;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly concurrency: number;
  readonly identifiers: number;
  /** Identifiers from an array built before the run, instead of per call. */
  readonly precomputed: boolean;
  readonly maxKeys?: number;
  /** A bench module (e.g. `metrics`) whose `inProcessContenders()` holds the contender, when not a memory store's. */
  readonly module?: string;
}

/** Heap after GC with `identifiers` identifiers held (one decision each), per identifier. */
export interface HeapJob {
  readonly kind: 'heap';
  readonly id: string;
  readonly identifiers: number;
  readonly maxKeys?: number;
}

/** Heap after GC as `arrivals` new identifiers keep arriving at a store bounded by `maxKeys`. */
export interface EvictionJob {
  readonly kind: 'eviction';
  readonly id: string;
  readonly maxKeys: number;
  readonly arrivals: number;
  /** Arrival counts at which the heap is read. */
  readonly checkpoints: readonly number[];
}

export type Job = RaceJob | HeapJob | EvictionJob;

export interface HeapResult {
  readonly identifiers: number;
  readonly heapBytes: number;
  readonly bytesPerIdentifier: number;
}

export interface EvictionResult {
  /** Heap growth (after GC) since before the store was made, at each checkpoint. */
  readonly samples: ReadonlyArray<{ readonly arrivals: number; readonly heapBytes: number }>;
  /** Decisions per second over the whole run, every one a new identifier (and, past maxKeys, an eviction). */
  readonly perSecond: number;
}

/**
 * The JavaScript heap in use after a full collection, plus the memory of ArrayBuffers (typed arrays
 * keep their contents outside the heap: a store that keeps columns there must not look smaller).
 */
function heapUsed(): number {
  collectGarbage();
  collectGarbage();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

async function contender(id: string, maxKeys: number | undefined, module?: string): Promise<Contender> {
  const extra =
    module === undefined
      ? []
      : ((await import(`./${module}.js`)) as { inProcessContenders(): Contender[] }).inProcessContenders();
  const found = [...memoryContenders(maxKeys === undefined ? {} : { maxKeys }), ...extra].find(
    (c) => c.id === id,
  );
  if (found === undefined) throw new Error(`No in-process contender ${id}`);
  return found;
}

async function race(job: RaceJob) {
  const decider = (await contender(job.id, job.maxKeys, job.module)).setup();
  const load = {
    concurrency: job.concurrency,
    identifiers: job.identifiers,
    latency: false,
    ...(job.precomputed ? { precomputed: precomputedIdentifiers(job.identifiers) } : {}),
  };
  // Twice over every identifier at least: state for each, and the code compiled.
  await runLoad(decider, { ...load, durationMs: job.warmupMs, minDecisions: 2 * job.identifiers });
  collectGarbage();
  const fromUs = microseconds();
  const result = await runLoad(decider, { ...load, durationMs: job.durationMs });
  return { ...result, fromUs, toUs: microseconds() };
}

/** The monotonic clock a CPU profile's timestamps use, in µs: profiles are cut to the measured run. */
function microseconds(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

async function heap(job: HeapJob): Promise<HeapResult> {
  const before = heapUsed();
  const decider = (await contender(job.id, job.maxKeys)).setup();
  for (let i = 0; i < job.identifiers; i++) await decider.decide(`user:${i}`);
  const heapBytes = heapUsed() - before;
  // Still reachable while the heap was read.
  if (decider.allowed === undefined) throw new Error('unreachable');
  return { identifiers: job.identifiers, heapBytes, bytesPerIdentifier: heapBytes / job.identifiers };
}

async function eviction(job: EvictionJob): Promise<EvictionResult> {
  const before = heapUsed();
  const decider = (await contender(job.id, job.maxKeys)).setup();
  const samples: Array<{ arrivals: number; heapBytes: number }> = [];
  let elapsedMs = 0;
  let arrived = 0;
  for (const checkpoint of job.checkpoints) {
    const started = performance.now();
    for (; arrived < checkpoint; arrived++) await decider.decide(`user:${arrived}`);
    elapsedMs += performance.now() - started;
    samples.push({ arrivals: arrived, heapBytes: heapUsed() - before });
  }
  return { samples, perSecond: (arrived / elapsedMs) * 1000 };
}

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2] ?? '{}') as Job;
  const result =
    job.kind === 'race' ? await race(job) : job.kind === 'heap' ? await heap(job) : await eviction(job);
  process.stdout.write(JSON.stringify(result));
}

main().then(
  // Peers leave timers behind (RateLimiterMemory keeps one per key): the job is done, so exit.
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
