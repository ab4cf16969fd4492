// The ledger of a token bucket budget: the pure twin of ledger-bucket.lua, one identifier's leases and demand.
import { type FloorGap, floorIn } from './ledger-regions.js';
import type { LedgerFields, LedgerOutcome } from './ledger-windows.js';

/** What every request of one ledger call shares: who asks, and the budget's terms. */
export interface BucketLedgerSettings {
  readonly region: number;
  readonly regions: number;
  /** How long a lease is held, on the ledger's clock, from the moment it is granted. */
  readonly leaseMs: number;
  /** The capacity that can be leased: the bucket's, less every region's floor. */
  readonly pool: number;
  /** The time the bucket takes to fill, in ms: a lease of capacity c comes with the rate c / tau. */
  readonly tau: number;
  /** Each region's floor capacity, which it holds while its floor's lease holds. */
  readonly floor: number;
  /**
   * Each region's floor gap as the caller last read it, in windows of floorGapWindowMs(leaseMs): a
   * region in its gap at the ledger's `now` lends its floor, which is added to `pool`. Undefined: no
   * floor is lent.
   */
  readonly gaps?: readonly FloorGap[] | undefined;
  /**
   * Whether the caller holds its floor's lease now. Without it (back from a lapse and waiting, or not yet renewed) it
   * decides on its leases alone, so what it wants is not lessened by its floor. Undefined: it holds it.
   */
  readonly holdsFloor?: boolean | undefined;
}

/** What the region holds after the call: its lease (capacity beyond its floor), all regions' leases, and its demand (units per second). */
export interface BucketLedgerReply {
  readonly lease: number;
  readonly leased: number;
  readonly demandPerSecond: number;
}

/**
 * The windows in which a bucket budget's floor gaps are kept (ledger-regions.ts): half a lease. A
 * lapsed floor is lent from the first such window after its lease ended, and a caller's view of a
 * lapse lasts at least one more such window, past its next renewal (every third of a lease).
 */
export function floorGapWindowMs(leaseMs: number): number {
  return Math.max(1, Math.floor(leaseMs / 2));
}

/** A lease's capacity goes with its share of the rate: enough for the demand seen, and a quarter more. */
const HEADROOM = 5 / 4;

function rateOf(value: (name: string) => number, region: number, now: number, periodMs: number): number {
  const period = Math.floor(now / periodMs);
  const at = value(`i:${region}`);
  let previous = 0;
  let current = 0;
  if (at === period) {
    previous = value(`o:${region}`);
    current = value(`d:${region}`);
  } else if (at === period - 1) {
    previous = value(`d:${region}`);
  }
  return (previous * (1 - (now - period * periodMs) / periodMs) + current) / periodMs;
}

/**
 * The most leases kept per region: a new lease ends after every other, so the ones it does not
 * exceed are dropped, and the rest (larger, ending sooner) stay a short staircase. Past this many,
 * the two first are kept as one: the larger level to the later end (more held, never less).
 */
const MAX_STEPS = 6;

/** A lease still held: its capacity, and when the ledger's clock lets it go. */
interface Step {
  readonly level: number;
  readonly expiry: number;
}

/** A region's leases, largest first (each ending later than the one before), the expired dropped. */
function stepsOf(fields: LedgerFields, region: number, now: number): Step[] {
  const steps: Step[] = [];
  for (let k = 0; fields.has(`l:${region}:${k}`); k++) {
    const expiry = fields.get(`x:${region}:${k}`) ?? 0;
    if (expiry > now) steps.push({ level: fields.get(`l:${region}:${k}`) ?? 0, expiry });
  }
  return steps;
}

function writeSteps(fields: LedgerFields, region: number, steps: readonly Step[]): void {
  for (let k = 0; fields.has(`l:${region}:${k}`); k++) {
    fields.delete(`l:${region}:${k}`);
    fields.delete(`x:${region}:${k}`);
  }
  steps.forEach((step, k) => {
    fields.set(`l:${region}:${k}`, step.level);
    fields.set(`x:${region}:${k}`, step.expiry);
  });
}

/** The region's leases with a new one, held until `expiry` (later than all): those it covers go. */
function withLease(steps: readonly Step[], lease: number, expiry: number): Step[] {
  const kept = steps.filter((step) => step.level > lease);
  if (lease > 0) kept.push({ level: lease, expiry });
  while (kept.length > MAX_STEPS) {
    const [first, second] = kept as [Step, Step];
    kept.splice(0, 2, { level: first.level, expiry: second.expiry });
  }
  return kept;
}

/** Drops expired leases and demand older than the last period; leases come back as staircases. */
function pruned(
  stored: LedgerFields,
  now: number,
  regions: number,
  periodMs: number,
): { fields: LedgerFields; steps: Step[][] } {
  const fields: LedgerFields = new Map(stored);
  const period = Math.floor(now / periodMs);
  const steps: Step[][] = [];
  for (let s = 0; s < regions; s++) {
    steps.push(stepsOf(fields, s, now));
    writeSteps(fields, s, steps[s] as Step[]);
    if ((fields.get(`i:${s}`) ?? 0) < period - 1) {
      for (const name of ['d', 'o', 'i']) fields.delete(`${name}:${s}`);
    }
  }
  return { fields, steps };
}

/**
 * Records a region's demand and grants it a lease: capacity beyond its floor, with the matching
 * share of the rate, held for `leaseMs` on the ledger's clock. A region's reservation is the largest
 * of its unexpired leases (a smaller lease does not free a larger one before that expires), and the
 * reservations of all regions never pass `pool`, so the rates and capacities regions use add up to
 * at most the bucket's at every moment. Capacity follows demand: a region gets what its demand
 * wants, up to its part of all demand, and beyond it what other regions are not owed. What a region wants is its
 * demand's capacity less its floor, or all of it when the caller says it does not hold its floor.
 */
export function bucketLedger(
  stored: LedgerFields,
  now: number,
  settings: BucketLedgerSettings,
  units: number,
): LedgerOutcome<BucketLedgerReply> {
  const { region, regions, leaseMs, tau, floor, gaps } = settings;
  const periodMs = leaseMs / 2;
  // Floors of regions in their gap now are lent: a lapsed region admits on its floor at no time in
  // its gap, and one back uses it only once every lease granted from it has ended and its floor has
  // had the time to fill since (see floor-lease.ts and docs/regions.md).
  const at = Math.floor(now / floorGapWindowMs(leaseMs));
  let pool = settings.pool;
  for (let s = 0; s < regions; s++) pool += floor - floorIn(gaps, s, at, floor);
  const { fields, steps } = pruned(stored, now, regions, periodMs);
  const value = (name: string): number => fields.get(name) ?? 0;
  record(fields, value, region, now, periodMs, units);
  const rates: number[] = [];
  let demand = 0;
  for (let s = 0; s < regions; s++) {
    rates.push(rateOf(value, s, now, periodMs));
    demand += rates[s] as number;
  }
  const ownFloor = settings.holdsFloor === false ? 0 : floor;
  const want = (s: number): number =>
    Math.min(
      pool,
      Math.max(0, Math.ceil((rates[s] as number) * tau * HEADROOM - (s === region ? ownFloor : floor))),
    );
  const fair = (s: number): number => (demand > 0 ? (pool * (rates[s] as number)) / demand : pool / regions);
  const reserved = (s: number): number => steps[s]?.[0]?.level ?? 0;
  let free = pool;
  let owed = 0;
  for (let s = 0; s < regions; s++) {
    if (s === region) continue;
    free -= reserved(s);
    owed += Math.max(0, Math.min(fair(s), want(s)) - reserved(s));
  }
  let lease = Math.floor(Math.min(want(region), Math.max(Math.min(fair(region), free), free - owed)));
  if (lease < 0) lease = 0;
  steps[region] = withLease(steps[region] ?? [], lease, now + leaseMs);
  writeSteps(fields, region, steps[region] as Step[]);
  let leased = 0;
  for (let s = 0; s < regions; s++) leased += reserved(s);
  return {
    fields,
    ttlMs: 3 * leaseMs,
    reply: { lease, leased, demandPerSecond: Math.ceil((rates[region] as number) * 1000) },
  };
}

/** Adds a region's units to its demand of this period (the period before becomes its previous one). */
function record(
  fields: LedgerFields,
  value: (name: string) => number,
  region: number,
  now: number,
  periodMs: number,
  units: number,
): void {
  const period = Math.floor(now / periodMs);
  const at = value(`i:${region}`);
  if (at === period) {
    fields.set(`d:${region}`, value(`d:${region}`) + units);
    return;
  }
  fields.set(`o:${region}`, at === period - 1 ? value(`d:${region}`) : 0);
  fields.set(`d:${region}`, units);
  fields.set(`i:${region}`, period);
}
