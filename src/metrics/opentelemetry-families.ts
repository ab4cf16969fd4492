// The OpenTelemetry exporter's observed instruments, one function per family, each with how a limiter's tally is observed on them.
import { DENY_LISTS, INSTRUMENTS, OUTCOMES, SKIP_REASONS } from './definitions.js';
import type { LimiterTally } from './tally.js';

export type Attributes = Record<string, string>;

export interface InstrumentOptions {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}

/** What a batch callback is handed at collection time. */
export interface Observations {
  observe(observable: object, value: number, attributes?: Attributes): void;
}

/** Makes an instrument of sluice's definitions (name, unit, description) on one meter. */
export interface Instruments {
  counter(instrument: keyof typeof INSTRUMENTS): object;
  gauge(instrument: keyof typeof INSTRUMENTS): object;
}

/** Instruments observed at collection time, and how one limiter's tally is observed on them. */
export interface ObservedFamily {
  readonly observables: object[];
  observe(result: Observations, tally: LimiterTally): void;
}

/** The description and unit every instrument carries. */
export function instrumentOptions(instrument: keyof typeof INSTRUMENTS): InstrumentOptions {
  return { description: INSTRUMENTS[instrument].help, unit: INSTRUMENTS[instrument].unit };
}

/** Decisions by outcome, units, calls the store did not decide, cache hits, near-limit calls, deny-list refusals. */
export function decisionInstruments(make: Instruments): ObservedFamily {
  const decisions = make.counter('decisions');
  const units = make.counter('units');
  const skipped = make.counter('skipped');
  const cacheHits = make.counter('cacheHits');
  const nearLimit = make.counter('nearLimit');
  const listDenials = make.counter('listDenials');
  return {
    observables: [decisions, units, skipped, cacheHits, nearLimit, listDenials],
    observe(result, t) {
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
      for (const list of DENY_LISTS) {
        const value = list === 'store' ? t.storeListDenials : t.middlewareListDenials;
        result.observe(listDenials, value, { limiter, list });
      }
    },
  };
}

/** Charges (usage known after the fact): how many, the units they took, the units maxDebt cut off. */
export function chargeInstruments(make: Instruments): ObservedFamily {
  const charges = make.counter('charges');
  const chargedUnits = make.counter('chargedUnits');
  const cutOff = make.counter('cutOff');
  return {
    observables: [charges, chargedUnits, cutOff],
    observe(result, t) {
      result.observe(charges, t.charges, { limiter: t.name });
      result.observe(chargedUnits, t.chargedUnits, { limiter: t.name });
      result.observe(cutOff, t.cutOff, { limiter: t.name });
    },
  };
}

/** Whether the store decides for the limiter now (its decision time is a histogram, recorded per decision). */
export function healthInstruments(make: Instruments): ObservedFamily {
  const up = make.gauge('storeUp');
  return {
    observables: [up],
    observe(result, t) {
      result.observe(up, t.downShards.size === 0 ? 1 : 0, { limiter: t.name });
    },
  };
}

/** Concurrency limiters only: slots in use, and slots of leases that lapsed unreleased. */
export function leaseInstruments(make: Instruments): ObservedFamily {
  const slots = make.gauge('leaseSlots');
  const expired = make.counter('leaseSlotsExpired');
  return {
    observables: [slots, expired],
    observe(result, t) {
      if (t.leases === undefined) return;
      result.observe(slots, t.leases.slotsInUse(), { limiter: t.name });
      result.observe(expired, t.leases.expired, { limiter: t.name });
    },
  };
}

/** Calls waiting for a slot now, and pauses taken from upstream answers (the time waited is a histogram). */
export function waitInstruments(make: Instruments): ObservedFamily {
  const waiting = make.gauge('waiting');
  const pauses = make.counter('pauses');
  return {
    observables: [waiting, pauses],
    observe(result, t) {
      result.observe(waiting, t.waits.waiting, { limiter: t.name });
      result.observe(pauses, t.waits.pauses, { limiter: t.name });
    },
  };
}

/** A global budget's instruments, for the limiters that have one, by limiter and region. */
export function budgetInstruments(make: Instruments): ObservedFamily {
  const budget = {
    granted: make.gauge('budgetGranted'),
    demand: make.gauge('budgetDemand'),
    identifiers: make.gauge('budgetIdentifiers'),
    calls: make.counter('budgetLedgerCalls'),
    entries: make.counter('budgetLedgerEntries'),
    seconds: make.gauge('budgetLedgerSeconds'),
    up: make.gauge('budgetLedgerUp'),
  };
  return {
    observables: Object.values(budget),
    observe(result, t) {
      const view = t.readBudget();
      if (view === undefined) return;
      const at = { limiter: t.name, region: view.region };
      result.observe(budget.granted, view.granted, at);
      result.observe(budget.demand, view.demand, at);
      result.observe(budget.identifiers, view.identifiers, at);
      result.observe(budget.calls, view.ledgerCalls - view.ledgerErrors, { ...at, outcome: 'ok' });
      result.observe(budget.calls, view.ledgerErrors, { ...at, outcome: 'failed' });
      result.observe(budget.entries, view.ledgerEntries, at);
      result.observe(budget.seconds, view.ledgerMs / 1000, at);
      result.observe(budget.up, view.ledgerUp ? 1 : 0, at);
    },
  };
}
