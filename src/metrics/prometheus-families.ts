// The Prometheus exporter's metrics, one function per family of instruments, each read from the tallies at scrape time.
import type { BudgetView } from '../budget/view.js';
import { DENY_LISTS, INSTRUMENTS, OUTCOMES, SKIP_REASONS, type SkipReason } from './definitions.js';
import {
  histogramSamples,
  type Labels,
  metric,
  type RegistryMetric,
  type Sample,
  type Tallies,
  waitSamples,
} from './registry-metric.js';

const SKIP_FIELDS: Readonly<Record<SkipReason, 'timeout' | 'storeError' | 'skipped' | 'fallback'>> = {
  timeout: 'timeout',
  store_error: 'storeError',
  skipped: 'skipped',
  fallback: 'fallback',
};

/** A counter with one series per limiter, read from one field of its tally. */
function simple(
  { prefix, each, zero }: Tallies,
  instrument: keyof typeof INSTRUMENTS,
  field: 'units' | 'cacheHits' | 'nearLimit' | 'charges' | 'chargedUnits' | 'cutOff',
): RegistryMetric {
  return metric(
    prefix,
    instrument,
    'counter',
    each((t) => [{ value: t[field], labels: { limiter: t.name } }]),
    () =>
      zero((t) => {
        t[field] = 0;
      }),
  );
}

/** Decisions by outcome, the units they asked, the calls the store did not decide, cache hits, near-limit calls. */
export function decisionFamily(tallies: Tallies): RegistryMetric[] {
  const { prefix, each, zero } = tallies;
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
      () => zero((t) => Object.assign(t, { allowed: 0, denied: 0, shadowDenied: 0 })),
    ),
    simple(tallies, 'units', 'units'),
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
      () => zero((t) => Object.assign(t, { timeout: 0, storeError: 0, skipped: 0, fallback: 0 })),
    ),
    simple(tallies, 'cacheHits', 'cacheHits'),
    simple(tallies, 'nearLimit', 'nearLimit'),
  ];
}

/** Charges (usage known after the fact): how many, the units they took, the units maxDebt cut off. */
export function chargeFamily(tallies: Tallies): RegistryMetric[] {
  return [
    simple(tallies, 'charges', 'charges'),
    simple(tallies, 'chargedUnits', 'chargedUnits'),
    simple(tallies, 'cutOff', 'cutOff'),
  ];
}

/** Requests a deny list refused, by list. */
export function listDenialMetric({ prefix, each, zero }: Tallies): RegistryMetric {
  return metric(
    prefix,
    'listDenials',
    'counter',
    each((t) =>
      DENY_LISTS.map((list) => ({
        value: list === 'store' ? t.storeListDenials : t.middlewareListDenials,
        labels: { limiter: t.name, list },
      })),
    ),
    () => zero((t) => Object.assign(t, { storeListDenials: 0, middlewareListDenials: 0 })),
  );
}

/** The store's health: the time it took to decide (histogram), and whether it decides now (gauge). */
export function storeFamily({ prefix, each, zero }: Tallies): {
  seconds: RegistryMetric;
  up: RegistryMetric;
} {
  return {
    seconds: metric(
      prefix,
      'storeSeconds',
      'histogram',
      each((t) => histogramSamples(`${prefix}${INSTRUMENTS.storeSeconds.prometheus}`, t)),
      () =>
        zero((t) => {
          t.clearHistogram();
        }),
    ),
    up: metric(
      prefix,
      'storeUp',
      'gauge',
      each((t) => [{ value: t.downShards.size === 0 ? 1 : 0, labels: { limiter: t.name } }]),
      () => {},
    ),
  };
}

/** Calls waiting for a slot: the time they waited, how many wait now, pauses from upstream answers. */
export function waitFamily({ prefix, each, zero }: Tallies): RegistryMetric[] {
  return [
    metric(
      prefix,
      'waitSeconds',
      'histogram',
      each((t) => waitSamples(`${prefix}${INSTRUMENTS.waitSeconds.prometheus}`, t)),
      () => zero((t) => t.waits.clear()),
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

/** Concurrency limiters' instruments: slots in use and leases that expired unreleased. */
export function leaseFamily({ prefix, each, zero }: Tallies): RegistryMetric[] {
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
      each((t) => (t.leases === undefined ? [] : [{ value: t.leases.expired, labels: { limiter: t.name } }])),
      () =>
        zero((t) => {
          if (t.leases !== undefined) t.leases.expired = 0;
        }),
    ),
    // The time throttle() calls waited for one of the limiter's leases, after their rate slot.
    metric(
      prefix,
      'leaseWaitSeconds',
      'histogram',
      each((t) =>
        t.leases === undefined
          ? []
          : waitSamples(`${prefix}${INSTRUMENTS.leaseWaitSeconds.prometheus}`, t, t.waits.leaseHistogram()),
      ),
      () => zero((t) => t.waits.clearLeases()),
    ),
  ];
}

/** A global budget's instruments, one series per limiter that has one. */
export function budgetFamily({ prefix, each }: Tallies): RegistryMetric[] {
  const budget = (read: (view: BudgetView, labels: Labels) => Sample[]): (() => Sample[]) =>
    each((t) => {
      const view = t.readBudget();
      return view === undefined ? [] : read(view, { limiter: t.name, region: view.region });
    });
  const gauge = (instrument: keyof typeof INSTRUMENTS, value: (view: BudgetView) => number): RegistryMetric =>
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
