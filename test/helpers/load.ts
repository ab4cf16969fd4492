// Keeps decisions in flight against a limiter, recording each one with when it started and how long it took.
import { performance } from 'node:perf_hooks';
import type { Decision, Limiter } from '../../src/index.js';

export interface Sample {
  readonly identifier: string;
  /** performance.now() when the call was made. */
  readonly startedAt: number;
  readonly elapsedMs: number;
  readonly decision: Decision;
}

export interface Load {
  readonly samples: Sample[];
  /** Calls made and not yet settled. */
  readonly pending: number;
  /** Stops starting calls and resolves once every call made has settled. */
  stop(): Promise<void>;
}

/**
 * Starts `workers` loops, each awaiting one `limit` call after another on identifiers from
 * `identifiers` (round robin), until stopped. A call that rejects fails the load when stopped.
 */
export function startLoad(limiter: Limiter, workers: number, identifiers: readonly string[]): Load {
  const samples: Sample[] = [];
  let running = true;
  let pending = 0;
  let next = 0;
  const failures: unknown[] = [];
  const loop = async (): Promise<void> => {
    while (running) {
      const identifier = identifiers[next++ % identifiers.length] as string;
      const startedAt = performance.now();
      pending++;
      try {
        const decision = await limiter.limit(identifier);
        samples.push({ identifier, startedAt, elapsedMs: performance.now() - startedAt, decision });
      } catch (error) {
        failures.push(error);
      } finally {
        pending--;
      }
      // Give timers and I/O a turn even when every answer comes from memory.
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const loops = Array.from({ length: workers }, loop);
  return {
    samples,
    get pending() {
      return pending;
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      if (failures.length > 0)
        throw new Error(`${failures.length} calls rejected; first: ${String(failures[0])}`);
    },
  };
}

/** The p-th percentile (0..100) of the values, by nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Latency figures for a report line: count, p50, p99 and max in ms. */
export function latencySummary(samples: readonly Sample[]): string {
  const values = samples.map((s) => s.elapsedMs);
  const fmt = (n: number): string => n.toFixed(2);
  return `n=${values.length} p50=${fmt(percentile(values, 50))}ms p99=${fmt(percentile(values, 99))}ms max=${fmt(percentile(values, 100))}ms`;
}

/** Collects unhandled rejections while installed; the listener also keeps them from crashing the run. */
export function watchUnhandledRejections(): { readonly seen: unknown[]; dispose(): void } {
  const seen: unknown[] = [];
  const listener = (reason: unknown): void => {
    seen.push(reason);
  };
  process.on('unhandledRejection', listener);
  return { seen, dispose: () => process.off('unhandledRejection', listener) };
}
