// The shape prom-client asks of a metric, built from sluice's instruments and read from the tallies at scrape time.
import { INSTRUMENTS } from './definitions.js';
import { cumulativeBuckets, type LimiterTally } from './tally.js';
import type { WaitHistogram } from './waits.js';

export type Labels = Record<string, string | number>;

export interface Sample {
  readonly value: number;
  readonly labels: Labels;
  readonly metricName?: string;
}

/**
 * What a registry asks of a metric when it renders `/metrics` (text or OpenMetrics) or JSON: the
 * same shape as prom-client's own metrics. The values are read from the tallies at that moment, so
 * a decision costs a few additions instead of prom-client's label hashing (about 0.2 µs per update).
 */
export interface RegistryMetric {
  name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly aggregator: 'sum' | 'min' | 'max';
  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }>;
  reset(): void;
}

/** What a family of metrics reads: the recorder's tallies, under the recorder's name prefix. */
export interface Tallies {
  readonly prefix: string;
  /** A read of every limiter's tally, made at each scrape. */
  each(read: (tally: LimiterTally) => Sample[]): () => Sample[];
  /** Clears what `registry.resetMetrics()` clears, in every limiter's tally. */
  zero(clear: (tally: LimiterTally) => void): void;
}

export function metric(
  prefix: string,
  instrument: keyof typeof INSTRUMENTS,
  type: RegistryMetric['type'],
  read: () => Sample[],
  reset: () => void,
  // The gauge of health: across a cluster's workers (prom-client's AggregatorRegistry), down anywhere is down.
  aggregator: RegistryMetric['aggregator'] = type === 'gauge' ? 'min' : 'sum',
): RegistryMetric {
  const { help } = INSTRUMENTS[instrument];
  const result: RegistryMetric = {
    // The registry renames counters for OpenMetrics (it drops `_total`), so `get` reads it back.
    name: `${prefix}${INSTRUMENTS[instrument].prometheus}`,
    help,
    type,
    aggregator,
    get: async () => ({ name: result.name, help, type, aggregator, values: read() }),
    reset,
  };
  return result;
}

export function histogramSamples(name: string, tally: LimiterTally): Sample[] {
  const buckets = cumulativeBuckets(tally);
  const samples: Sample[] = buckets.map(({ le, count }) => ({
    value: count,
    labels: { limiter: tally.name, le: le === Number.POSITIVE_INFINITY ? '+Inf' : le },
    metricName: `${name}_bucket`,
  }));
  samples.push(
    { value: tally.histogram().sumMs / 1000, labels: { limiter: tally.name }, metricName: `${name}_sum` },
    {
      value: buckets[buckets.length - 1]?.count ?? 0,
      labels: { limiter: tally.name },
      metricName: `${name}_count`,
    },
  );
  return samples;
}

export function waitSamples(
  name: string,
  tally: LimiterTally,
  { buckets, sum, count }: WaitHistogram = tally.waits.histogram(),
): Sample[] {
  const labels = { limiter: tally.name };
  const samples: Sample[] = buckets.map(({ le, count: inBucket }) => ({
    value: inBucket,
    labels: { limiter: tally.name, le: le === Number.POSITIVE_INFINITY ? '+Inf' : le },
    metricName: `${name}_bucket`,
  }));
  samples.push(
    { value: sum, labels, metricName: `${name}_sum` },
    { value: count, labels, metricName: `${name}_count` },
  );
  return samples;
}
