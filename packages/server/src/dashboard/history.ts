// The dashboard's memory: each limiter's counts sampled once a second over the last five minutes.
import type { DecisionMetrics, LimiterMetrics } from 'sluice/metrics';

/** Seconds of history the chart shows. */
export const HISTORY_SECONDS = 300;
/** Seconds over which the decision time percentiles are taken. */
export const LATENCY_WINDOW_SECONDS = 60;

interface Counts {
  readonly allowed: number;
  readonly denied: number;
  readonly shadowDenied: number;
  /** Cumulative store decision counts per upper bound (seconds), the last one +Inf. */
  readonly buckets: readonly number[];
}

interface Sample {
  readonly atMs: number;
  readonly limiters: ReadonlyMap<string, Counts>;
}

/** One limiter's chart and percentiles, as the data endpoint sends them. */
export interface LimiterSeries {
  /** Decisions per interval, oldest first; the last interval is the current, unfinished second. */
  readonly allowed: number[];
  readonly denied: number[];
  readonly shadowDenied: number[];
  /** Store decision time percentiles over the last minute, in ms; `null` without store decisions. */
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  /** The upper bounds (ms) of the buckets the percentiles fell in: below the first, the store is faster than it. */
  readonly p50BucketMs: number | null;
  readonly p99BucketMs: number | null;
  readonly latencyCount: number;
}

function countsOf(limiter: LimiterMetrics): Counts {
  return {
    allowed: limiter.decisions.allowed,
    denied: limiter.decisions.denied,
    shadowDenied: limiter.decisions.shadow_denied,
    buckets: limiter.storeDecisionSeconds.buckets.map((bucket) => bucket.count),
  };
}

function sample(metrics: DecisionMetrics, atMs: number): Sample {
  return {
    atMs,
    limiters: new Map(metrics.snapshot().map((limiter) => [limiter.limiter, countsOf(limiter)])),
  };
}

/**
 * Estimates a quantile from cumulative bucket counts as Prometheus's histogram_quantile does:
 * linear within the bucket it falls in. Returns the estimate and that bucket's upper bound, in ms.
 */
export function quantileMs(
  q: number,
  bounds: readonly number[],
  cumulative: readonly number[],
): { estimateMs: number; bucketMs: number } | null {
  const total = cumulative[cumulative.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let i = cumulative.findIndex((count) => count >= rank);
  if (i === -1) i = cumulative.length - 1;
  // Above the last finite bound, say the last bound: the histogram knows no more.
  if (i >= bounds.length) {
    const last = (bounds[bounds.length - 1] as number) * 1000;
    return { estimateMs: last, bucketMs: last };
  }
  const lower = i === 0 ? 0 : (bounds[i - 1] as number);
  const upper = bounds[i] as number;
  const below = i === 0 ? 0 : (cumulative[i - 1] as number);
  const inBucket = (cumulative[i] as number) - below;
  const estimate = inBucket === 0 ? upper : lower + ((upper - lower) * (rank - below)) / inBucket;
  return { estimateMs: estimate * 1000, bucketMs: upper * 1000 };
}

/** Samples a recorder once a second; `series()` adds the current, unfinished second. */
export class DecisionHistory {
  readonly #metrics: DecisionMetrics;
  readonly #bounds: readonly number[];
  readonly #samples: Sample[] = [];
  readonly #timer: NodeJS.Timeout;
  readonly #clock: () => number;

  constructor(metrics: DecisionMetrics, bounds: readonly number[], clock: () => number = Date.now) {
    this.#metrics = metrics;
    this.#bounds = bounds;
    this.#clock = clock;
    this.tick();
    this.#timer = setInterval(() => this.tick(), 1000);
    this.#timer.unref();
  }

  /** Takes a sample now (the timer calls it each second). */
  tick(): void {
    this.#samples.push(sample(this.#metrics, this.#clock()));
    if (this.#samples.length > HISTORY_SECONDS) this.#samples.shift();
  }

  /** Stops sampling. */
  close(): void {
    clearInterval(this.#timer);
  }

  /** When the chart's first interval starts (ms since the epoch). */
  get startMs(): number {
    return this.#samples[0]?.atMs ?? this.#clock();
  }

  /** Each limiter's decisions per interval since the oldest sample, and its recent percentiles. */
  series(): Map<string, LimiterSeries> {
    const now = sample(this.#metrics, this.#clock());
    const points = [...this.#samples, now];
    const windowStart = points[Math.max(0, points.length - 1 - LATENCY_WINDOW_SECONDS)] as Sample;
    const result = new Map<string, LimiterSeries>();
    for (const [name, latest] of now.limiters) {
      const steps = (field: 'allowed' | 'denied' | 'shadowDenied'): number[] =>
        points.slice(1).map((point, i) => {
          const before = points[i]?.limiters.get(name)?.[field] ?? 0;
          // A registry reset sets counters back: show nothing rather than a negative rate.
          return Math.max(0, (point.limiters.get(name)?.[field] ?? 0) - before);
        });
      const start = windowStart.limiters.get(name)?.buckets ?? [];
      const recent = latest.buckets.map((count, i) => Math.max(0, count - (start[i] ?? 0)));
      const p50 = quantileMs(0.5, this.#bounds, recent);
      const p99 = quantileMs(0.99, this.#bounds, recent);
      result.set(name, {
        allowed: steps('allowed'),
        denied: steps('denied'),
        shadowDenied: steps('shadowDenied'),
        p50Ms: p50?.estimateMs ?? null,
        p99Ms: p99?.estimateMs ?? null,
        p50BucketMs: p50?.bucketMs ?? null,
        p99BucketMs: p99?.bucketMs ?? null,
        latencyCount: recent[recent.length - 1] ?? 0,
      });
    }
    return result;
  }
}
