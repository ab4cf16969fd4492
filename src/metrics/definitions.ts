// The instruments sluice exports, named once for Prometheus and OpenTelemetry alike.

/**
 * Upper bounds of the store decision time histogram, in seconds: 0.1 ms (a memory store, a Redis
 * on the same host) to 1 s (far beyond any sensible `timeoutMs`).
 */
export const STORE_SECONDS_BUCKETS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
];

/**
 * Upper bounds of the time waited for a slot (wait(), throttle()), in seconds: from a slot that
 * came at once to a minute (the default `maxWaitMs`).
 */
export const WAIT_SECONDS_BUCKETS: readonly number[] = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/** The same bounds in milliseconds, which is what a decision's context carries. */
export const STORE_MS_BUCKETS: readonly number[] = STORE_SECONDS_BUCKETS.map(
  (s) => Math.round(s * 1e7) / 1e4,
);

/** A decision's outcome label: `shadow_denied` is a denial that shadow mode (`enforce: false`) let through. */
export type MetricOutcome = 'allowed' | 'denied' | 'shadow_denied';
export const OUTCOMES: readonly MetricOutcome[] = ['allowed', 'denied', 'shadow_denied'];

/**
 * Why the store did not make a decision: it did not answer in time, it failed, it was known to be
 * down and not asked, or the in-process fallback store of `onStoreError: 'fallback'` decided.
 */
export type SkipReason = 'timeout' | 'store_error' | 'skipped' | 'fallback';
export const SKIP_REASONS: readonly SkipReason[] = ['timeout', 'store_error', 'skipped', 'fallback'];

/** The deny lists whose refusals are counted (see `MetricsRecorder.listDenied`). */
export const DENY_LISTS = ['store', 'middleware'] as const;

interface Instrument {
  /** Prometheus name, without a prefix. */
  readonly prometheus: string;
  /** OpenTelemetry name. */
  readonly openTelemetry: string;
  /** UCUM unit for OpenTelemetry. */
  readonly unit: string;
  readonly help: string;
}

export const INSTRUMENTS = {
  decisions: {
    prometheus: 'sluice_decisions_total',
    openTelemetry: 'sluice.decisions',
    unit: '{decision}',
    help: 'Decisions by limiter and outcome (allowed, denied, shadow_denied).',
  },
  units: {
    prometheus: 'sluice_units_total',
    openTelemetry: 'sluice.units',
    unit: '{unit}',
    help: 'Units requested (the cost of each decision; a takeUpTo counts the units it took), by limiter.',
  },
  skipped: {
    prometheus: 'sluice_store_skipped_total',
    openTelemetry: 'sluice.store.skipped',
    unit: '{decision}',
    help: 'Decisions the store did not make, by limiter and reason (timeout, store_error, skipped, fallback).',
  },
  cacheHits: {
    prometheus: 'sluice_deny_cache_hits_total',
    openTelemetry: 'sluice.deny_cache.hits',
    unit: '{decision}',
    help: 'Denials answered by the deny cache without asking the store, by limiter.',
  },
  nearLimit: {
    prometheus: 'sluice_near_limit_total',
    openTelemetry: 'sluice.near_limit',
    unit: '{decision}',
    help: 'Allowed decisions that left 20% of the limit or less, by limiter.',
  },
  listDenials: {
    prometheus: 'sluice_list_denials_total',
    openTelemetry: 'sluice.list_denials',
    unit: '{request}',
    help: 'Requests refused by a deny list, by limiter and list (store: limiter.deny(); middleware: the deny option).',
  },
  charges: {
    prometheus: 'sluice_charges_total',
    openTelemetry: 'sluice.charges',
    unit: '{charge}',
    help: 'Charges (usage known after the fact, taken into debt if need be), by limiter.',
  },
  chargedUnits: {
    prometheus: 'sluice_charged_units_total',
    openTelemetry: 'sluice.charged.units',
    unit: '{unit}',
    help: 'Units charges took, by limiter (what maxDebt cut off is not among them).',
  },
  cutOff: {
    prometheus: 'sluice_debt_cut_off_units_total',
    openTelemetry: 'sluice.debt.cut_off',
    unit: '{unit}',
    help: 'Units charges did not take because the debt would have passed maxDebt, by limiter.',
  },
  storeSeconds: {
    prometheus: 'sluice_store_decision_seconds',
    openTelemetry: 'sluice.store.decision.duration',
    unit: 's',
    help: 'Time the store took to decide, by limiter.',
  },
  leaseSlots: {
    prometheus: 'sluice_lease_slots_in_use',
    openTelemetry: 'sluice.lease.slots.in_use',
    unit: '{slot}',
    help: "A concurrency limiter's slots held now, as far as this process saw (each identifier as of its last decision), by limiter.",
  },
  leaseSlotsExpired: {
    prometheus: 'sluice_lease_slots_expired_total',
    openTelemetry: 'sluice.lease.slots.expired',
    unit: '{slot}',
    help: 'Slots of leases that lapsed without being released (a crashed or stuck holder), counted by the call that freed them, by limiter.',
  },
  waitSeconds: {
    prometheus: 'sluice_wait_seconds',
    openTelemetry: 'sluice.wait.duration',
    unit: 's',
    help: 'Time calls waited for their slot before they went (wait(), throttle()), by limiter.',
  },
  leaseWaitSeconds: {
    prometheus: 'sluice_lease_wait_seconds',
    openTelemetry: 'sluice.lease.wait.duration',
    unit: 's',
    help: 'Time throttle() calls waited for a lease of their concurrency limiter, after their rate slot, before they ran, by (concurrency) limiter.',
  },
  waiting: {
    prometheus: 'sluice_waiting',
    openTelemetry: 'sluice.waiting',
    unit: '{call}',
    help: 'Calls waiting for a slot now (wait(), throttle()), by limiter.',
  },
  pauses: {
    prometheus: 'sluice_upstream_pauses_total',
    openTelemetry: 'sluice.upstream.pauses',
    unit: '{pause}',
    help: 'Pauses throttle() took from upstream answers (429 or 503 with Retry-After, RateLimit with nothing left) and wrote to the store, by limiter.',
  },
  budgetGranted: {
    prometheus: 'sluice_budget_granted_units',
    openTelemetry: 'sluice.budget.granted',
    unit: '{unit}',
    help: 'Units a region holds of a global budget beyond its floors, summed over the identifiers this process tracks: granted for the current window, or leased capacity (a bucket), by limiter and region.',
  },
  budgetDemand: {
    prometheus: 'sluice_budget_demand_units',
    openTelemetry: 'sluice.budget.demand',
    unit: '{unit}',
    help: 'Units asked of a global budget: of this process in the current window, or of the whole region per second (a bucket), by limiter and region.',
  },
  budgetIdentifiers: {
    prometheus: 'sluice_budget_identifiers',
    openTelemetry: 'sluice.budget.identifiers',
    unit: '{identifier}',
    help: 'Identifiers of a global budget this process keeps track of (those with recent calls), by limiter and region.',
  },
  budgetLedgerCalls: {
    prometheus: 'sluice_budget_ledger_calls_total',
    openTelemetry: 'sluice.budget.ledger.calls',
    unit: '{call}',
    help: 'Calls of a global budget ledger from this process, by limiter, region and outcome (ok, failed).',
  },
  budgetLedgerEntries: {
    prometheus: 'sluice_budget_ledger_entries_total',
    openTelemetry: 'sluice.budget.ledger.entries',
    unit: '{identifier}',
    help: 'Identifiers those ledger calls carried, summed, by limiter and region.',
  },
  budgetLedgerSeconds: {
    prometheus: 'sluice_budget_ledger_seconds',
    openTelemetry: 'sluice.budget.ledger.duration',
    unit: 's',
    help: 'How long ledger calls take (a moving average), by limiter and region.',
  },
  budgetLedgerUp: {
    prometheus: 'sluice_budget_ledger_up',
    openTelemetry: 'sluice.budget.ledger.up',
    unit: '1',
    help: '1 while the last ledger call of a global budget succeeded, 0 while the region decides on what it holds, by limiter and region.',
  },
  storeUp: {
    prometheus: 'sluice_store_up',
    openTelemetry: 'sluice.store.up',
    unit: '1',
    help: '1 while the store decides for the limiter, 0 while its failure policy (onStoreError) does.',
  },
} as const satisfies Record<string, Instrument>;
