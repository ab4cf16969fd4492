// The Envoy service's metrics under the names envoyproxy/ratelimit users know, on a prom-client Registry: its statsd
// mapping's names, each counter's with `_total` added, as Prometheus names counters (promtool's lint asks for it).
import type { Counter, Histogram, Registry } from 'prom-client';

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

interface Incrementer {
  inc(value?: number): void;
}

interface SeriesCounters {
  readonly totalHits: Incrementer;
  readonly overLimit: Incrementer;
  readonly nearLimit: Incrementer;
  readonly withinLimit: Incrementer;
  readonly shadowMode: Incrementer;
}

/** The counters and histogram, registered once per registry. */
export class EnvoyMetrics {
  readonly #totalHits: Counter<string>;
  readonly #overLimit: Counter<string>;
  readonly #nearLimit: Counter<string>;
  readonly #withinLimit: Counter<string>;
  readonly #shadowMode: Counter<string>;
  readonly #errors: Counter<string>;
  readonly #globalShadow: Counter<string>;
  readonly #responseTime: Histogram<string>;
  readonly #requests: Counter<string>;
  readonly #loadSuccess: Counter<string>;
  readonly #loadError: Counter<string>;
  /** Each label set's counters, made once: prom-client would otherwise hash the labels on every inc. */
  readonly #series = new Map<string, SeriesCounters>();
  readonly #detailed = new Set<string>();

  constructor(client: PromClient, registry: Registry) {
    const counter = (name: string, help: string, labelNames: string[] = []): Counter<string> =>
      (registry.getSingleMetric(name) as Counter<string> | undefined) ??
      new client.Counter({ name, help, labelNames, registers: [registry] });
    const keys = ['domain', 'key1', 'key2'];
    this.#totalHits = counter(
      'ratelimit_service_rate_limit_total_hits_total',
      'Hits asked of a limit.',
      keys,
    );
    this.#overLimit = counter(
      'ratelimit_service_rate_limit_over_limit_total',
      'Hits refused by a limit (a refused request takes none of its hits).',
      keys,
    );
    this.#nearLimit = counter(
      'ratelimit_service_rate_limit_near_limit_total',
      'Hits within a limit past 80% of it.',
      keys,
    );
    this.#withinLimit = counter(
      'ratelimit_service_rate_limit_within_limit_total',
      'Hits within a limit.',
      keys,
    );
    this.#shadowMode = counter(
      'ratelimit_service_rate_limit_shadow_mode_total',
      'Hits over a limit in shadow mode, answered OK.',
      keys,
    );
    this.#errors = counter(
      'ratelimit_service_should_rate_limit_error_total',
      'ShouldRateLimit calls answered with an error: redis_error (the store failed), service_error (a bad request).',
      ['err_type'],
    );
    this.#globalShadow = counter(
      'ratelimit_service_global_shadow_mode_total',
      'Requests over a limit answered OK by the global shadow mode.',
    );
    this.#requests = counter('ratelimit_service_total_requests_total', 'Calls per gRPC method.', [
      'grpc_method',
    ]);
    this.#responseTime =
      (registry.getSingleMetric('ratelimit_service_response_time_seconds') as
        | Histogram<string>
        | undefined) ??
      new client.Histogram({
        name: 'ratelimit_service_response_time_seconds',
        help: 'Time to answer a call, per gRPC method.',
        labelNames: ['grpc_method'],
        buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
        registers: [registry],
      });
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
    const series = this.#countersOf(outcome);
    const { hits, limit, before } = outcome;
    series.totalHits.inc(hits);
    if (outcome.over) {
      series.overLimit.inc(hits);
      if (outcome.shadow) series.shadowMode.inc(hits);
      return;
    }
    const near = Math.floor(limit * NEAR_LIMIT_RATIO);
    const after = before + hits;
    if (after > near) series.nearLimit.inc(before >= near ? hits : after - near);
    series.withinLimit.inc(hits);
  }

  /** A descriptor with no limit to count against (unlimited): its hits are within. */
  unlimited(outcome: Pick<DescriptorOutcome, 'domain' | 'statsParts' | 'ruleParts' | 'hits'>): void {
    const series = this.#countersOf(outcome);
    series.totalHits.inc(outcome.hits);
    series.withinLimit.inc(outcome.hits);
  }

  error(type: ErrorType): void {
    this.#errors.inc({ err_type: type });
  }

  globalShadow(): void {
    this.#globalShadow.inc();
  }

  /** Starts timing a call; the returned function ends it. */
  call(method: string): () => void {
    this.#requests.inc({ grpc_method: method });
    return this.#responseTime.startTimer({ grpc_method: method }) as () => void;
  }

  configLoaded(ok: boolean): void {
    (ok ? this.#loadSuccess : this.#loadError).inc();
  }

  #countersOf(outcome: Pick<DescriptorOutcome, 'domain' | 'statsParts' | 'ruleParts'>): SeriesCounters {
    let parts = outcome.statsParts;
    let key = `${outcome.domain}\n${parts[0] ?? ''}\n${parts[1] ?? ''}`;
    if (parts !== outcome.ruleParts && !this.#detailed.has(key)) {
      if (this.#detailed.size < MAX_DETAILED_SERIES) this.#detailed.add(key);
      else {
        parts = outcome.ruleParts;
        key = `${outcome.domain}\n${parts[0] ?? ''}\n${parts[1] ?? ''}`;
      }
    }
    let series = this.#series.get(key);
    if (series === undefined) {
      const labels = { domain: outcome.domain, key1: parts[0] ?? '', key2: parts[1] ?? '' };
      series = {
        totalHits: this.#totalHits.labels(labels),
        overLimit: this.#overLimit.labels(labels),
        nearLimit: this.#nearLimit.labels(labels),
        withinLimit: this.#withinLimit.labels(labels),
        shadowMode: this.#shadowMode.labels(labels),
      };
      this.#series.set(key, series);
    }
    return series;
  }
}

/** Loads prom-client (an optional peer) and registers the metrics, or explains what to install. */
export async function envoyMetrics(registry: Registry): Promise<EnvoyMetrics> {
  const client = (await import('prom-client')) as PromClient & { default?: PromClient };
  return new EnvoyMetrics(client.Counter === undefined && client.default ? client.default : client, registry);
}
