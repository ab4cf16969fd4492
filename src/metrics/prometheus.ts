// prometheusMetrics(): decision counts exposed through a prom-client registry, read at scrape time.
import type { BudgetView } from '../budget/view.js';
import { invalidOption } from '../errors.js';
import { DENY_LISTS, INSTRUMENTS, OUTCOMES, SKIP_REASONS, type SkipReason } from './definitions.js';
import { type HotOptions, resolveMetricsOptions } from './options.js';
import {
  cumulativeBuckets,
  DecisionMetrics,
  type DecisionMetricsOptions,
  type LimiterTally,
} from './tally.js';

/**
 * A prom-client `Registry`, or anything that registers metrics the same way. Typed by shape so that
 * `sluice/metrics` compiles without prom-client's types when you use OpenTelemetry instead.
 */
export interface PrometheusRegistry {
  registerMetric(metric: never): void;
}

/** Options of {@link prometheusMetrics}. */
export interface PrometheusMetricsOptions extends DecisionMetricsOptions {
  /**
   * Where the metrics are registered (`new Registry()` from prom-client, or the default `register`).
   * @default prom-client's default registry, joined once prom-client has loaded (see `ready`)
   */
  readonly registry?: PrometheusRegistry;
  /**
   * Put before every metric name, e.g. `myapp_` for `myapp_sluice_decisions_total`.
   * @default ''
   */
  readonly prefix?: string;
}

/** A recorder whose counts a prom-client registry exposes. */
export interface PrometheusMetrics extends DecisionMetrics {
  /**
   * Settles once the metrics are in their registry: at once when `registry` was given; otherwise
   * after prom-client has loaded. Rejects when prom-client is not installed or a metric of the same
   * name is already registered (also reported once as a process warning).
   */
  readonly ready: Promise<void>;
}

type Labels = Record<string, string | number>;
interface Sample {
  readonly value: number;
  readonly labels: Labels;
  readonly metricName?: string;
}

/**
 * What a registry asks of a metric when it renders `/metrics` (text or OpenMetrics) or JSON: the
 * same shape as prom-client's own metrics. The values are read from the tallies at that moment, so
 * a decision costs a few additions instead of prom-client's label hashing (about 0.2 µs per update).
 */
interface RegistryMetric {
  name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly aggregator: 'sum' | 'min' | 'max';
  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }>;
  reset(): void;
}

const PREFIX = /^([a-zA-Z_:][a-zA-Z0-9_:]*)?$/;

const SKIP_FIELDS: Readonly<Record<SkipReason, 'timeout' | 'storeError' | 'skipped' | 'fallback'>> = {
  timeout: 'timeout',
  store_error: 'storeError',
  skipped: 'skipped',
  fallback: 'fallback',
};

class PrometheusRecorder extends DecisionMetrics implements PrometheusMetrics {
  readonly ready: Promise<void>;

  constructor(hot: HotOptions, registry: PrometheusRegistry | undefined, prefix: string) {
    super(hot);
    const metrics = this.#metrics(prefix);
    const register = (target: PrometheusRegistry): void => {
      for (const metric of metrics) target.registerMetric(metric as never);
    };
    if (registry !== undefined) {
      register(registry);
      this.ready = Promise.resolve();
      return;
    }
    this.ready = import('prom-client').then(
      (promClient) => register(promClient.register),
      (error: unknown) => {
        throw new Error(
          "prometheusMetrics() without `registry` registers on prom-client's default registry, but prom-client could not be loaded: npm install prom-client",
          { cause: error },
        );
      },
    );
    this.ready.catch((error: unknown) => {
      process.emitWarning(`sluice: ${(error as Error).message}`, {
        type: 'SluiceWarning',
        code: 'SLUICE_METRICS_NOT_REGISTERED',
      });
    });
  }

  #metrics(prefix: string): RegistryMetric[] {
    const each = (read: (tally: LimiterTally) => Sample[]): (() => Sample[]) => {
      return () => [...this.tallies].flatMap(read);
    };
    // A counter with one series per limiter, read from one field of its tally.
    const simple = (
      instrument: keyof typeof INSTRUMENTS,
      field: 'units' | 'cacheHits' | 'nearLimit' | 'charges' | 'chargedUnits' | 'cutOff',
    ): RegistryMetric =>
      metric(
        prefix,
        instrument,
        'counter',
        each((t) => [{ value: t[field], labels: { limiter: t.name } }]),
        () =>
          this.#zero((t) => {
            t[field] = 0;
          }),
      );
    return [
      metric(
        prefix,
        'decisions',
        'counter',
        each((t) => [
          { value: t.allowed, labels: { limiter: t.name, outcome: OUTCOMES[0] as string } },
          { value: t.denied, labels: { limiter: t.name, outcome: OUTCOMES[1] as string } },
          { value: t.shadowDenied, labels: { limiter: t.name, outcome: OUTCOMES[2] as string } },
        ]),
        () => this.#zero((t) => Object.assign(t, { allowed: 0, denied: 0, shadowDenied: 0 })),
      ),
      simple('units', 'units'),
      metric(
        prefix,
        'skipped',
        'counter',
        each((t) =>
          SKIP_REASONS.map((reason) => ({
            value: t[SKIP_FIELDS[reason]],
            labels: { limiter: t.name, reason },
          })),
        ),
        () => this.#zero((t) => Object.assign(t, { timeout: 0, storeError: 0, skipped: 0, fallback: 0 })),
      ),
      simple('cacheHits', 'cacheHits'),
      simple('nearLimit', 'nearLimit'),
      simple('charges', 'charges'),
      simple('chargedUnits', 'chargedUnits'),
      simple('cutOff', 'cutOff'),
      metric(
        prefix,
        'listDenials',
        'counter',
        each((t) =>
          DENY_LISTS.map((list) => ({
            value: list === 'store' ? t.storeListDenials : t.middlewareListDenials,
            labels: { limiter: t.name, list },
          })),
        ),
        () => this.#zero((t) => Object.assign(t, { storeListDenials: 0, middlewareListDenials: 0 })),
      ),
      metric(
        prefix,
        'storeSeconds',
        'histogram',
        each((t) => histogramSamples(`${prefix}${INSTRUMENTS.storeSeconds.prometheus}`, t)),
        () =>
          this.#zero((t) => {
            t.clearHistogram();
          }),
      ),
      ...this.#waitMetrics(prefix, each),
      metric(
        prefix,
        'storeUp',
        'gauge',
        each((t) => [{ value: t.downShards.size === 0 ? 1 : 0, labels: { limiter: t.name } }]),
        () => {},
      ),
      ...this.#leaseMetrics(prefix, each),
      ...this.#budgetMetrics(prefix),
    ];
  }

  /** Concurrency limiters' instruments: slots in use and leases that expired unreleased. */
  #leaseMetrics(
    prefix: string,
    each: (read: (tally: LimiterTally) => Sample[]) => () => Sample[],
  ): RegistryMetric[] {
    return [
      // Concurrency limiters only. Workers of one cluster see the same identifiers: the most any saw, not their sum.
      metric(
        prefix,
        'leaseSlots',
        'gauge',
        each((t) =>
          t.leases === undefined ? [] : [{ value: t.leases.slotsInUse(), labels: { limiter: t.name } }],
        ),
        () => {},
        'max',
      ),
      metric(
        prefix,
        'leaseSlotsExpired',
        'counter',
        each((t) =>
          t.leases === undefined ? [] : [{ value: t.leases.expired, labels: { limiter: t.name } }],
        ),
        () =>
          this.#zero((t) => {
            if (t.leases !== undefined) t.leases.expired = 0;
          }),
      ),
    ];
  }

  /** A global budget's instruments, one series per limiter that has one. */
  #budgetMetrics(prefix: string): RegistryMetric[] {
    const budget = (read: (view: BudgetView, labels: Labels) => Sample[]): (() => Sample[]) => {
      return () =>
        [...this.tallies].flatMap((t) => {
          const view = t.readBudget();
          return view === undefined ? [] : read(view, { limiter: t.name, region: view.region });
        });
    };
    const gauge = (
      instrument: keyof typeof INSTRUMENTS,
      value: (view: BudgetView) => number,
    ): RegistryMetric =>
      metric(
        prefix,
        instrument,
        'gauge',
        budget((view, labels) => [{ value: value(view), labels }]),
        () => {},
      );
    return [
      gauge('budgetGranted', (view) => view.granted),
      gauge('budgetDemand', (view) => view.demand),
      gauge('budgetIdentifiers', (view) => view.identifiers),
      metric(
        prefix,
        'budgetLedgerCalls',
        'counter',
        budget((view, labels) => [
          { value: view.ledgerCalls - view.ledgerErrors, labels: { ...labels, outcome: 'ok' } },
          { value: view.ledgerErrors, labels: { ...labels, outcome: 'failed' } },
        ]),
        () => {},
      ),
      metric(
        prefix,
        'budgetLedgerEntries',
        'counter',
        budget((view, labels) => [{ value: view.ledgerEntries, labels }]),
        () => {},
      ),
      gauge('budgetLedgerSeconds', (view) => view.ledgerMs / 1000),
      gauge('budgetLedgerUp', (view) => (view.ledgerUp ? 1 : 0)),
    ];
  }

  /** Calls waiting for a slot: the time they waited, how many wait now, pauses from upstream answers. */
  #waitMetrics(
    prefix: string,
    each: (read: (tally: LimiterTally) => Sample[]) => () => Sample[],
  ): RegistryMetric[] {
    return [
      metric(
        prefix,
        'waitSeconds',
        'histogram',
        each((t) => waitSamples(`${prefix}${INSTRUMENTS.waitSeconds.prometheus}`, t)),
        () => this.#zero((t) => t.waits.clear()),
      ),
      // Calls waiting across a cluster's workers add up.
      metric(
        prefix,
        'waiting',
        'gauge',
        each((t) => [{ value: t.waits.waiting, labels: { limiter: t.name } }]),
        () => {},
        'sum',
      ),
      metric(
        prefix,
        'pauses',
        'counter',
        each((t) => [{ value: t.waits.pauses, labels: { limiter: t.name } }]),
        () => {},
      ),
    ];
  }

  #zero(clear: (tally: LimiterTally) => void): void {
    for (const tally of this.tallies) clear(tally);
  }
}

function metric(
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

function histogramSamples(name: string, tally: LimiterTally): Sample[] {
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

function waitSamples(name: string, tally: LimiterTally): Sample[] {
  const { buckets, sum, count } = tally.waits.histogram();
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

/**
 * A recorder for `createLimiter({ metrics })` whose counts a prom-client registry serves:
 * `sluice_decisions_total{limiter,outcome}`, `sluice_units_total{limiter}`,
 * `sluice_store_skipped_total{limiter,reason}`, `sluice_deny_cache_hits_total{limiter}`,
 * `sluice_near_limit_total{limiter}`, `sluice_charges_total{limiter}`,
 * `sluice_charged_units_total{limiter}`, `sluice_debt_cut_off_units_total{limiter}`,
 * `sluice_store_decision_seconds{limiter}` (histogram, 0.1 ms to 1 s), `sluice_store_up{limiter}`,
 * and for calls waiting for a slot `sluice_wait_seconds{limiter}` (histogram, 1 ms to 60 s),
 * `sluice_waiting{limiter}` and `sluice_upstream_pauses_total{limiter}`. Labels name limiters,
 * never identifiers: those are in
 * `topDenied()`. prom-client is an optional peer dependency, loaded only without `registry`.
 *
 * @example
 * import { Registry } from 'prom-client';
 * import { prometheusMetrics } from 'sluice/metrics';
 * const registry = new Registry();
 * const metrics = prometheusMetrics({ registry });
 * const limiter = createLimiter({ store, policy, name: 'api', metrics });
 * app.get('/metrics', async (_req, res) => res.type(registry.contentType).send(await registry.metrics()));
 */
export function prometheusMetrics(options?: PrometheusMetricsOptions): PrometheusMetrics {
  const { raw, hot } = resolveMetricsOptions('prometheusMetrics', options, ['registry', 'prefix'], false);
  const registry = raw.registry as PrometheusRegistry | undefined;
  if (
    registry !== undefined &&
    (typeof registry !== 'object' || registry === null || typeof registry.registerMetric !== 'function')
  ) {
    throw invalidOption('registry', "a prom-client Registry (new Registry() from 'prom-client')", registry);
  }
  const prefix = raw.prefix ?? '';
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    throw invalidOption(
      'prefix',
      'a Prometheus name prefix such as "myapp_" (letters, digits, _ and :)',
      prefix,
    );
  }
  return new PrometheusRecorder(hot, registry, prefix);
}
