// openTelemetryMetrics(): the same instruments on an OpenTelemetry meter, counters observed at collection time.
import { invalidOption } from '../errors.js';
import type { WaitEvent } from '../hooks.js';
import { INSTRUMENTS, STORE_SECONDS_BUCKETS, WAIT_SECONDS_BUCKETS } from './definitions.js';
import {
  type Attributes,
  budgetInstruments,
  chargeInstruments,
  decisionInstruments,
  healthInstruments,
  type InstrumentOptions,
  type Instruments,
  instrumentOptions,
  leaseInstruments,
  waitInstruments,
} from './opentelemetry-families.js';
import { type HotOptions, resolveMetricsOptions } from './options.js';
import { DecisionMetrics, type DecisionMetricsOptions, type LimiterTally } from './tally.js';

/**
 * An OpenTelemetry `Meter` (`metrics.getMeter('my-service')` from `@opentelemetry/api`), typed by
 * shape so that `sluice/metrics` compiles without OpenTelemetry's types when you use Prometheus.
 */
export interface OpenTelemetryMeter<Observable extends object = object> {
  createHistogram(
    name: string,
    options?: InstrumentOptions,
  ): { record(value: number, attributes?: Attributes): void };
  createObservableCounter(name: string, options?: InstrumentOptions): Observable;
  createObservableGauge(name: string, options?: InstrumentOptions): Observable;
  addBatchObservableCallback(
    callback: (result: {
      observe(observable: Observable, value: number, attributes?: Attributes): void;
    }) => void,
    observables: Observable[],
  ): void;
}

/** Options of {@link openTelemetryMetrics}. */
export interface OpenTelemetryMetricsOptions extends DecisionMetricsOptions {
  /** The meter the instruments are made on. */
  readonly meter: OpenTelemetryMeter;
}

class OpenTelemetryRecorder extends DecisionMetrics {
  readonly #histogram: { record(value: number, attributes?: Attributes): void };
  readonly #waits: { record(value: number, attributes?: Attributes): void };
  readonly #leaseWaits: { record(value: number, attributes?: Attributes): void };
  // One attributes object per limiter, made once: the SDK reads it on every observation.
  readonly #attributes = new WeakMap<LimiterTally, Attributes>();

  constructor(hot: HotOptions, meter: OpenTelemetryMeter) {
    super(hot);
    const make: Instruments = {
      counter: (instrument) =>
        meter.createObservableCounter(INSTRUMENTS[instrument].openTelemetry, instrumentOptions(instrument)),
      gauge: (instrument) =>
        meter.createObservableGauge(INSTRUMENTS[instrument].openTelemetry, instrumentOptions(instrument)),
    };
    // Instruments are made in the order an exporter lists them.
    this.#histogram = meter.createHistogram(INSTRUMENTS.storeSeconds.openTelemetry, {
      ...instrumentOptions('storeSeconds'),
      advice: { explicitBucketBoundaries: [...STORE_SECONDS_BUCKETS] },
    });
    const families = [
      decisionInstruments(make),
      chargeInstruments(make),
      healthInstruments(make),
      leaseInstruments(make),
      waitInstruments(make),
    ];
    this.#waits = meter.createHistogram(INSTRUMENTS.waitSeconds.openTelemetry, {
      ...instrumentOptions('waitSeconds'),
      advice: { explicitBucketBoundaries: [...WAIT_SECONDS_BUCKETS] },
    });
    this.#leaseWaits = meter.createHistogram(INSTRUMENTS.leaseWaitSeconds.openTelemetry, {
      ...instrumentOptions('leaseWaitSeconds'),
      advice: { explicitBucketBoundaries: [...WAIT_SECONDS_BUCKETS] },
    });
    families.push(budgetInstruments(make));
    // Counts are cumulative in the tallies: observing them at collection time costs nothing per decision.
    meter.addBatchObservableCallback(
      (result) => {
        for (const tally of this.tallies) {
          for (const family of families) family.observe(result, tally);
        }
      },
      families.flatMap((family) => family.observables),
    );
  }

  /** A wait that went is one histogram recording, as a store decision's time is. */
  override waited(name: string, event: WaitEvent): void {
    super.waited(name, event);
    if (event.kind === 'done' && event.allowed) this.#waits.record(event.waitedMs / 1000, { limiter: name });
    else if (event.kind === 'leased' && event.allowed) {
      this.#leaseWaits.record(event.waitedMs / 1000, { limiter: name });
    }
  }

  protected override observe(tally: LimiterTally, storeMs: number): number {
    const counted = super.observe(tally, storeMs);
    let attributes = this.#attributes.get(tally);
    if (attributes === undefined) {
      attributes = { limiter: tally.name };
      this.#attributes.set(tally, attributes);
    }
    this.#histogram.record(counted / 1000, attributes);
    return counted;
  }
}

/**
 * A recorder for `createLimiter({ metrics })` on an OpenTelemetry meter: the counters
 * `sluice.decisions` (attributes `limiter`, `outcome`), `sluice.units`, `sluice.store.skipped`
 * (`reason`), `sluice.deny_cache.hits`, `sluice.near_limit`, `sluice.charges`,
 * `sluice.charged.units` and `sluice.debt.cut_off`, observed at collection time; the
 * histogram `sluice.store.decision.duration` in seconds; the gauge `sluice.store.up`; for calls
 * waiting for a slot, the histogram `sluice.wait.duration`, the gauge `sluice.waiting` and the
 * counter `sluice.upstream.pauses`; for a concurrency limiter of `throttle()`, the histogram
 * `sluice.lease.wait.duration`. Each
 * store decision is one histogram recording on the meter; the counters cost nothing per decision.
 *
 * @example
 * import { metrics } from '@opentelemetry/api';
 * import { openTelemetryMetrics } from 'sluice/metrics';
 * const recorder = openTelemetryMetrics({ meter: metrics.getMeter('checkout') });
 * const limiter = createLimiter({ store, policy, name: 'api', metrics: recorder });
 */
export function openTelemetryMetrics(options: OpenTelemetryMetricsOptions): DecisionMetrics {
  const { raw, hot } = resolveMetricsOptions('openTelemetryMetrics', options, ['meter'], true);
  const meter = raw.meter as OpenTelemetryMeter | undefined;
  if (
    typeof meter !== 'object' ||
    meter === null ||
    typeof meter.createHistogram !== 'function' ||
    typeof meter.addBatchObservableCallback !== 'function'
  ) {
    throw invalidOption(
      'meter',
      "an OpenTelemetry Meter (metrics.getMeter('name') from @opentelemetry/api)",
      meter,
    );
  }
  return new OpenTelemetryRecorder(hot, meter);
}
