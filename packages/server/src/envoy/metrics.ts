// The Envoy service's metrics under the names envoyproxy/ratelimit users know, on a prom-client Registry: its statsd
// mapping's names, each counter's with `_total` added, as Prometheus names counters (promtool's lint asks for it).
import { performance } from 'node:perf_hooks';
import type { Counter, Registry } from 'prom-client';

type PromClient = typeof import('prom-client');

/** The reference's near-limit ratio: hits past 80% of the limit count as near it. */
const NEAR_LIMIT_RATIO = 0.8;

/**
 * The most label sets per counter from request values (`detailed_metric`, `value_to_metric`); past
 * it, such descriptors are counted under their rule's own key, so clients cannot grow the registry.
 */
const MAX_DETAILED_SERIES = 2000;

/** What one descriptor's decision adds to the counters. */
export interface DescriptorOutcome {
  readonly domain: string;
  /** The stats key's parts after the domain (key1, key2, ...). */
  readonly statsParts: readonly string[];
  /** The rule's own parts, used once detailed series reach their bound. */
  readonly ruleParts: readonly string[];
  readonly hits: number;
  readonly limit: number;
  /** Units in use before this request. */
  readonly before: number;
  /** Refused: over its limit. */
  readonly over: boolean;
  readonly shadow: boolean;
}

export type ErrorType = 'redis_error' | 'service_error';

/** One label set's hits, as plain numbers: a descriptor adds to them; a scrape reads them. */
interface Series {
  readonly labels: { readonly domain: string; readonly key1: string; readonly key2: string };
  totalHits: number;
  overLimit: number;
  nearLimit: number;
  withinLimit: number;
  shadowMode: number;
  /** Which of the counters were added to (bits in SERIES_COUNTERS' order): only those are exported. */
  added: number;
}

/** The descriptor counters: name, help, and the Series field each reads. */
const SERIES_COUNTERS = [
  ['ratelimit_service_rate_limit_total_hits_total', 'Hits asked of a limit.', 'totalHits'],
  [
    'ratelimit_service_rate_limit_over_limit_total',
    'Hits refused by a limit (a refused request takes none of its hits).',
    'overLimit',
  ],
  ['ratelimit_service_rate_limit_near_limit_total', 'Hits within a limit past 80% of it.', 'nearLimit'],
  ['ratelimit_service_rate_limit_within_limit_total', 'Hits within a limit.', 'withinLimit'],
  [
    'ratelimit_service_rate_limit_shadow_mode_total',
    'Hits over a limit in shadow mode, answered OK.',
    'shadowMode',
  ],
] as const;

const TOTAL = 1;
const OVER = 2;
const NEAR = 4;
const WITHIN = 8;
const SHADOW = 16;

/** The response time histogram's upper bounds, in seconds. */
const RESPONSE_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
];

/** One gRPC method's calls and their response times (per bucket, not cumulative; the last is above 1 s). */
class MethodTally {
  calls = 0;
  sumS = 0;
  readonly buckets = new Float64Array(RESPONSE_BUCKETS.length + 1);

  constructor(readonly method: string) {}

  observe(seconds: number): void {
    let i = 0;
    while (i < RESPONSE_BUCKETS.length && seconds > (RESPONSE_BUCKETS[i] as number)) i++;
    this.buckets[i] = (this.buckets[i] as number) + 1;
    this.sumS += seconds;
  }
}

type Sample = { value: number; labels: Record<string, string | number>; metricName?: string };

/**
 * A metric as a prom-client Registry renders it (the shape of its own), read from the tallies at
 * each scrape: a call costs a few additions, not prom-client's hashing of its labels on every update.
 */
interface TallyMetric {
  name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }>;
  reset(): void;
}

/** The counts behind a registry's Envoy metrics: one set per registry, shared by every service on it. */
class EnvoyTallies {
  /** Each label set's hits, by domain and stats key. */
  readonly series = new Map<string, Series>();
  /** Label sets from request values (detailed_metric, value_to_metric), bounded by MAX_DETAILED_SERIES. */
  readonly detailed = new Set<string>();
  readonly methods = new Map<string, MethodTally>();

  constructor(registry: Registry) {
    const metric = (
      name: string,
      help: string,
      type: TallyMetric['type'],
      read: () => Sample[],
      reset: () => void,
    ): void => {
      const made: TallyMetric = {
        // The registry renames counters for OpenMetrics (it drops `_total`): `get` reads the name back.
        name,
        help,
        type,
        aggregator: 'sum',
        get: async () => ({ name: made.name, help, type, aggregator: 'sum', values: read() }),
        reset,
      };
      registry.registerMetric(made as never);
    };
    SERIES_COUNTERS.forEach(([name, help, field], bit) => {
      metric(
        name,
        help,
        'counter',
        () =>
          [...this.series.values()]
            .filter((series) => (series.added & (1 << bit)) !== 0)
            .map((series) => ({ value: series[field], labels: { ...series.labels } })),
        () => {
          for (const series of this.series.values()) {
            series[field] = 0;
            series.added &= ~(1 << bit);
          }
        },
      );
    });
    metric(
      'ratelimit_service_total_requests_total',
      'Calls per gRPC method.',
      'counter',
      () =>
        [...this.methods.values()].map((tally) => ({
          value: tally.calls,
          labels: { grpc_method: tally.method },
        })),
      () => {
        for (const tally of this.methods.values()) tally.calls = 0;
      },
    );
    const time = 'ratelimit_service_response_time_seconds';
    metric(
      time,
      'Time to answer a call, per gRPC method.',
      'histogram',
      () => [...this.methods.values()].flatMap((tally) => responseSamples(time, tally)),
      () => {
        for (const tally of this.methods.values()) {
          tally.buckets.fill(0);
          tally.sumS = 0;
        }
      },
    );
  }

  method(name: string): MethodTally {
    let tally = this.methods.get(name);
    if (tally === undefined) {
      tally = new MethodTally(name);
      this.methods.set(name, tally);
    }
    return tally;
  }
}

/** A method's response time histogram as a registry's samples: cumulative buckets, sum and count. */
function responseSamples(name: string, tally: MethodTally): Sample[] {
  const labels = { grpc_method: tally.method };
  const samples: Sample[] = [];
  let count = 0;
  for (let i = 0; i <= RESPONSE_BUCKETS.length; i++) {
    count += tally.buckets[i] as number;
    samples.push({
      value: count,
      labels: { le: RESPONSE_BUCKETS[i] ?? '+Inf', ...labels },
      metricName: `${name}_bucket`,
    });
  }
  samples.push(
    { value: tally.sumS, labels, metricName: `${name}_sum` },
    { value: count, labels, metricName: `${name}_count` },
  );
  return samples;
}

/** Each registry's tallies, made with its first EnvoyMetrics. */
const TALLIES = new WeakMap<Registry, EnvoyTallies>();

/** The service's metrics on a registry: the per-call ones kept as plain numbers (EnvoyTallies), the rare ones prom-client's. */
export class EnvoyMetrics {
  readonly #tallies: EnvoyTallies;
  readonly #errors: Counter<string>;
  readonly #globalShadow: Counter<string>;
  readonly #loadSuccess: Counter<string>;
  readonly #loadError: Counter<string>;
  /** The last method timed, and its tally: a service has one method on its hot path. */
  #lastMethod: MethodTally | undefined;

  constructor(client: PromClient, registry: Registry) {
    const counter = (name: string, help: string, labelNames: string[] = []): Counter<string> =>
      (registry.getSingleMetric(name) as Counter<string> | undefined) ??
      new client.Counter({ name, help, labelNames, registers: [registry] });
    let tallies = TALLIES.get(registry);
    if (tallies === undefined) {
      tallies = new EnvoyTallies(registry);
      TALLIES.set(registry, tallies);
    }
    this.#tallies = tallies;
    this.#errors = counter(
      'ratelimit_service_should_rate_limit_error_total',
      'ShouldRateLimit calls answered with an error: redis_error (the store failed), service_error (a bad request).',
      ['err_type'],
    );
    this.#globalShadow = counter(
      'ratelimit_service_global_shadow_mode_total',
      'Requests over a limit answered OK by the global shadow mode.',
    );
    this.#loadSuccess = counter(
      'ratelimit_service_config_load_success_total',
      'Config loads that succeeded.',
    );
    this.#loadError = counter(
      'ratelimit_service_config_load_error_total',
      'Config loads refused (the previous config stays in force).',
    );
  }

  /**
   * Counts a descriptor's hits: every hit of a refused descriptor is over (a refusal takes none of
   * them), and hits taken past 80% of the limit are near it, as the reference counts them.
   */
  descriptor(outcome: DescriptorOutcome): void {
    const series = this.#seriesOf(outcome);
    const { hits, limit, before } = outcome;
    series.totalHits += hits;
    if (outcome.over) {
      series.overLimit += hits;
      series.added |= TOTAL | OVER;
      if (outcome.shadow) {
        series.shadowMode += hits;
        series.added |= SHADOW;
      }
      return;
    }
    const near = Math.floor(limit * NEAR_LIMIT_RATIO);
    const after = before + hits;
    if (after > near) {
      series.nearLimit += before >= near ? hits : after - near;
      series.added |= NEAR;
    }
    series.withinLimit += hits;
    series.added |= TOTAL | WITHIN;
  }

  /** A descriptor with no limit to count against (unlimited): its hits are within. */
  unlimited(outcome: Pick<DescriptorOutcome, 'domain' | 'statsParts' | 'ruleParts' | 'hits'>): void {
    const series = this.#seriesOf(outcome);
    series.totalHits += outcome.hits;
    series.withinLimit += outcome.hits;
    series.added |= TOTAL | WITHIN;
  }

  error(type: ErrorType): void {
    this.#errors.inc({ err_type: type });
  }

  globalShadow(): void {
    this.#globalShadow.inc();
  }

  /** Starts timing a call; the returned function ends it. */
  call(method: string): () => void {
    let tally = this.#lastMethod;
    if (tally === undefined || tally.method !== method) {
      tally = this.#tallies.method(method);
      this.#lastMethod = tally;
    }
    tally.calls++;
    const started = performance.now();
    const timed = tally;
    return () => timed.observe((performance.now() - started) / 1000);
  }

  configLoaded(ok: boolean): void {
    (ok ? this.#loadSuccess : this.#loadError).inc();
  }

  #seriesOf(outcome: Pick<DescriptorOutcome, 'domain' | 'statsParts' | 'ruleParts'>): Series {
    const { series: all, detailed } = this.#tallies;
    let parts = outcome.statsParts;
    let key = `${outcome.domain}\n${parts[0] ?? ''}\n${parts[1] ?? ''}`;
    if (parts !== outcome.ruleParts && !detailed.has(key)) {
      if (detailed.size < MAX_DETAILED_SERIES) detailed.add(key);
      else {
        parts = outcome.ruleParts;
        key = `${outcome.domain}\n${parts[0] ?? ''}\n${parts[1] ?? ''}`;
      }
    }
    let series = all.get(key);
    if (series === undefined) {
      series = {
        labels: { domain: outcome.domain, key1: parts[0] ?? '', key2: parts[1] ?? '' },
        totalHits: 0,
        overLimit: 0,
        nearLimit: 0,
        withinLimit: 0,
        shadowMode: 0,
        added: 0,
      };
      all.set(key, series);
    }
    return series;
  }
}

/** Loads prom-client (an optional peer) and registers the metrics, or explains what to install. */
export async function envoyMetrics(registry: Registry): Promise<EnvoyMetrics> {
  const client = (await import('prom-client')) as PromClient & { default?: PromClient };
  return new EnvoyMetrics(client.Counter === undefined && client.default ? client.default : client, registry);
}
