// The load generator: a closed loop of N workers, each awaiting one decision after another, on
// identifiers taken round robin and built per call (as a request's address or header is), with every
// decision's latency recorded.
import { performance } from 'node:perf_hooks';

/**
 * How a contender decides: one call per decision, and how to read its answer. The loop awaits the
 * call's own promise (no `.then` of ours in between, which would cost as much as an in-process
 * decision).
 */
export interface Decider<T = unknown> {
  decide(identifier: string): Promise<T>;
  /** Whether the answer allowed the request. */
  allowed(answer: T): boolean;
  /** For a library that rejects a denied request (rate-limiter-flexible): whether a rejection is a denial. */
  denial?(reason: unknown): boolean;
}

export interface LoadOptions {
  /** Decisions kept in flight at once. */
  readonly concurrency: number;
  /** How many distinct identifiers: the i-th decision goes to `user:<i mod identifiers>`. */
  readonly identifiers: number;
  /**
   * Identifiers built once, before the run, instead of per call. V8 caches a string's hash in the
   * string, so a Map looks up a precomputed identifier faster than one a request just built: kept
   * for the second column only.
   */
  readonly precomputed?: readonly string[];
  /** Builds the identifier of an index instead of `user:<index>` (e.g. hot and cold identifiers). */
  readonly name?: (index: number) => string;
  /** Stop starting decisions after this long (ms); the ones in flight still count. */
  readonly durationMs: number;
  /** Keep going past `durationMs` until this many decisions were made (a warm-up that reaches every identifier). */
  readonly minDecisions?: number;
  /** Record each decision's latency (skipped for the in-process stores, where the clock reads cost as much as a decision). */
  readonly latency?: boolean;
  /** Picks the identifier of the i-th decision; round robin over `identifiers` by default. */
  readonly pick?: (index: number) => number;
  /** Called with the identifier index, latency and verdict of every decision, e.g. to split hot from cold. */
  readonly observe?: (identifierIndex: number, latencyMs: number, allowed: boolean) => void;
}

export interface LoadResult {
  readonly decisions: number;
  readonly allowed: number;
  readonly elapsedMs: number;
  readonly perSecond: number;
  /** Latency percentiles in ms, when recorded. */
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  /**
   * This process's CPU time (user + system, every thread) per decision, in µs: steadier than
   * decisions/s on a shared machine, where other work takes turns on the cores.
   */
  readonly cpuUsecPerDecision: number;
}

const MAX_SAMPLES = 4_000_000;

/** The q-quantile (0..1) of sorted values, nearest rank. */
export function quantile(sorted: Float64Array | number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/**
 * Collects garbage now when node runs with --expose-gc (npm run bench does), so that a run does not
 * pay for the garbage of the one before it.
 */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Runs the loop until `durationMs` has passed and every decision in flight has settled. */
export async function runLoad<T>(decider: Decider<T>, options: LoadOptions): Promise<LoadResult> {
  const { concurrency, identifiers, precomputed, name, durationMs, pick, observe } = options;
  const minDecisions = options.minDecisions ?? 0;
  const latency = options.latency ?? true;
  const samples = latency ? new Float64Array(MAX_SAMPLES) : undefined;
  let count = 0;
  let allowed = 0;
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + durationMs;
  let running = true;
  // The timer stops loops whose decisions wait on I/O; the loops also read the clock themselves.
  const timer = setTimeout(() => {
    running = false;
  }, durationMs);
  const worker = async (): Promise<void> => {
    while (running || next < minDecisions) {
      const index = pick === undefined ? next++ % identifiers : pick(next++);
      // Built here, per call, as traffic brings it: a new string whose hash nobody has computed yet.
      const identifier =
        precomputed !== undefined
          ? (precomputed[index] as string)
          : name !== undefined
            ? name(index)
            : `user:${index}`;
      if (samples === undefined) {
        let ok: boolean;
        try {
          ok = decider.allowed(await decider.decide(identifier));
        } catch (reason) {
          if (decider.denial?.(reason) !== true) throw reason;
          ok = false;
        }
        if (ok) allowed++;
        // An in-process store answers in microtasks, so the timer never gets its turn: read the clock now and then.
        if ((++count & 1023) === 0 && performance.now() > deadline) running = false;
      } else {
        const t0 = performance.now();
        let ok: boolean;
        try {
          ok = decider.allowed(await decider.decide(identifier));
        } catch (reason) {
          if (decider.denial?.(reason) !== true) throw reason;
          ok = false;
        }
        const elapsed = performance.now() - t0;
        if (ok) allowed++;
        if (count < MAX_SAMPLES) samples[count] = elapsed;
        count++;
        if (observe !== undefined) observe(index, elapsed, ok);
        // A saturated event loop can starve the timer: the clock is read anyway here.
        if (t0 > deadline) running = false;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  clearTimeout(timer);
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  let p50Ms: number | null = null;
  let p99Ms: number | null = null;
  if (samples !== undefined) {
    const sorted = samples.slice(0, Math.min(count, MAX_SAMPLES)).sort();
    p50Ms = quantile(sorted, 0.5);
    p99Ms = quantile(sorted, 0.99);
  }
  return {
    decisions: count,
    allowed,
    elapsedMs,
    perSecond: (count / elapsedMs) * 1000,
    p50Ms,
    p99Ms,
    cpuUsecPerDecision: (cpu.user + cpu.system) / count,
  };
}

/** The identifiers of a precomputed run: the same names the per-call runs build. */
export function precomputedIdentifiers(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `user:${i}`);
}

/** The median of numbers (the mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}
