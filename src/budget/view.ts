// What a region holds and asks for one budgeted limiter, as one process sees it: for metrics and the dashboard.

/** What a region holds and asks, as this process sees it (metrics, the dashboard). */
export interface BudgetView {
  readonly name: string;
  readonly region: string;
  readonly regions: readonly string[];
  /** `fixed`, `sliding` (grants per window) or `bucket` (leases of rate and capacity). */
  readonly kind: 'fixed' | 'sliding' | 'bucket';
  /** Identifiers this process keeps track of (those with recent calls). */
  readonly identifiers: number;
  /** Units this region holds beyond its floors: granted for the current window, or leased capacity. */
  readonly granted: number;
  /**
   * Units asked: of this process in the current window (windows), or of the whole region per
   * second, as the ledger last counted them (a bucket).
   */
  readonly demand: number;
  /** Ledger calls this process made, and how many failed or ran out of time. */
  readonly ledgerCalls: number;
  /** Identifiers those calls carried, summed: the ledger's cost per identifier is this over time. */
  readonly ledgerEntries: number;
  readonly ledgerErrors: number;
  /** How long the last ledger calls took (a moving average), in ms. */
  readonly ledgerMs: number;
  /** Whether the last ledger call succeeded. */
  readonly ledgerUp: boolean;
  /**
   * Whether this process admits on its floor now. A window budget's region holds its floor as a
   * lease, renewed by each of its processes: false until a process's first renewal is answered, and
   * once its last renewal is older than 0.9 × `leaseMs` (see docs/regions.md). Always true for buckets.
   */
  readonly floorHeld: boolean;
}
