// prometheusMetrics(): decision counts exposed through a prom-client registry, read at scrape time.
import { invalidOption } from '../errors.js';
import { type HotOptions, resolveMetricsOptions } from './options.js';
import {
  budgetFamily,
  chargeFamily,
  decisionFamily,
  leaseFamily,
  listDenialMetric,
  storeFamily,
  waitFamily,
} from './prometheus-families.js';
import type { RegistryMetric, Tallies } from './registry-metric.js';
import { DecisionMetrics, type DecisionMetricsOptions } from './tally.js';

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

const PREFIX = /^([a-zA-Z_:][a-zA-Z0-9_:]*)?$/;

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

  /** Every metric, in the order the registry lists them. */
  #metrics(prefix: string): RegistryMetric[] {
    const tallies: Tallies = {
      prefix,
      each: (read) => () => [...this.tallies].flatMap(read),
      zero: (clear) => {
        for (const tally of this.tallies) clear(tally);
      },
    };
    const store = storeFamily(tallies);
    return [
      ...decisionFamily(tallies),
      ...chargeFamily(tallies),
      listDenialMetric(tallies),
      store.seconds,
      ...waitFamily(tallies),
      store.up,
      ...leaseFamily(tallies),
      ...budgetFamily(tallies),
    ];
  }
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
