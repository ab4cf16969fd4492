// openTelemetryMetrics(): the same instruments on an OpenTelemetry meter, counters observed at collection time.
import { invalidOption } from '../errors.js';
import type { WaitEvent } from '../hooks.js';
import {
  DENY_LISTS,
  INSTRUMENTS,
  OUTCOMES,
  SKIP_REASONS,
  STORE_SECONDS_BUCKETS,
  WAIT_SECONDS_BUCKETS,
} from './definitions.js';
import { type HotOptions, resolveMetricsOptions } from './options.js';
import { DecisionMetrics, type DecisionMetricsOptions, type LimiterTally } from './tally.js';

type Attributes = Record<string, string>;

interface InstrumentOptions {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}

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
  // One attributes object per limiter, made once: the SDK reads it on every observation.
  readonly #attributes = new WeakMap<LimiterTally, Attributes>();

  constructor(hot: HotOptions, meter: OpenTelemetryMeter) {
    super(hot);
    const options = (instrument: keyof typeof INSTRUMENTS): InstrumentOptions => ({
      description: INSTRUMENTS[instrument].help,
      unit: INSTRUMENTS[instrument].unit,
    });
    this.#histogram = meter.createHistogram(INSTRUMENTS.storeSeconds.openTelemetry, {
      ...options('storeSeconds'),
      advice: { explicitBucketBoundaries: [...STORE_SECONDS_BUCKETS] },
    });
    const counter = (instrument: keyof typeof INSTRUMENTS): object =>
      meter.createObservableCounter(INSTRUMENTS[instrument].openTelemetry, options(instrument));
    const decisions = counter('decisions');
    const units = counter('units');
    const skipped = counter('skipped');
    const cacheHits = counter('cacheHits');
    const nearLimit = counter('nearLimit');
    const listDenials = counter('listDenials');
    const charges = counter('charges');
    const chargedUnits = counter('chargedUnits');
    const cutOff = counter('cutOff');
    const up = meter.createObservableGauge(INSTRUMENTS.storeUp.openTelemetry, options('storeUp'));
    const slots = meter.createObservableGauge(INSTRUMENTS.leaseSlots.openTelemetry, options('leaseSlots'));
    const expired = counter('leaseSlotsExpired');
    const waiting = meter.createObservableGauge(INSTRUMENTS.waiting.openTelemetry, options('waiting'));
    const pauses = counter('pauses');
    this.#waits = meter.createHistogram(INSTRUMENTS.waitSeconds.openTelemetry, {
      ...options('waitSeconds'),
      advice: { explicitBucketBoundaries: [...WAIT_SECONDS_BUCKETS] },
    });
    const gauge = (instrument: keyof typeof INSTRUMENTS): object =>
      meter.createObservableGauge(INSTRUMENTS[instrument].openTelemetry, options(instrument));
    const budget = {
      granted: gauge('budgetGranted'),
      demand: gauge('budgetDemand'),
      identifiers: gauge('budgetIdentifiers'),
      calls: counter('budgetLedgerCalls'),
      entries: counter('budgetLedgerEntries'),
      seconds: gauge('budgetLedgerSeconds'),
      up: gauge('budgetLedgerUp'),
    };
    // Counts are cumulative in the tallies: observing them at collection time costs nothing per decision.
    meter.addBatchObservableCallback(
      (result) => {
        for (const t of this.tallies) {
          const limiter = t.name;
          const outcomes = [t.allowed, t.denied, t.shadowDenied];
          OUTCOMES.forEach((outcome, i) => {
            result.observe(decisions, outcomes[i] as number, { limiter, outcome });
          });
          const reasons = [t.timeout, t.storeError, t.skipped, t.fallback];
          SKIP_REASONS.forEach((reason, i) => {
            result.observe(skipped, reasons[i] as number, { limiter, reason });
          });
          result.observe(units, t.units, { limiter });
          result.observe(cacheHits, t.cacheHits, { limiter });
          result.observe(nearLimit, t.nearLimit, { limiter });
          result.observe(charges, t.charges, { limiter });
          result.observe(chargedUnits, t.chargedUnits, { limiter });
          result.observe(cutOff, t.cutOff, { limiter });
          for (const list of DENY_LISTS) {
            const value = list === 'store' ? t.storeListDenials : t.middlewareListDenials;
            result.observe(listDenials, value, { limiter, list });
          }
          result.observe(up, t.downShards.size === 0 ? 1 : 0, { limiter });
          if (t.leases !== undefined) {
            result.observe(slots, t.leases.slotsInUse(), { limiter });
            result.observe(expired, t.leases.expired, { limiter });
          }
          result.observe(waiting, t.waits.waiting, { limiter });
          result.observe(pauses, t.waits.pauses, { limiter });
          const view = t.readBudget();
          if (view === undefined) continue;
          const at = { limiter, region: view.region };
          result.observe(budget.granted, view.granted, at);
          result.observe(budget.demand, view.demand, at);
          result.observe(budget.identifiers, view.identifiers, at);
          result.observe(budget.calls, view.ledgerCalls - view.ledgerErrors, { ...at, outcome: 'ok' });
          result.observe(budget.calls, view.ledgerErrors, { ...at, outcome: 'failed' });
          result.observe(budget.entries, view.ledgerEntries, at);
          result.observe(budget.seconds, view.ledgerMs / 1000, at);
          result.observe(budget.up, view.ledgerUp ? 1 : 0, at);
        }
      },
      [
        decisions,
        units,
        skipped,
        cacheHits,
        nearLimit,
        listDenials,
        charges,
        chargedUnits,
        cutOff,
        up,
        slots,
        expired,
        waiting,
        pauses,
        ...Object.values(budget),
      ],
    );
  }

  /** A wait that went is one histogram recording, as a store decision's time is. */
  override waited(name: string, event: WaitEvent): void {
    super.waited(name, event);
    if (event.kind === 'done' && event.allowed) this.#waits.record(event.waitedMs / 1000, { limiter: name });
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
 * counter `sluice.upstream.pauses`. Each
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
