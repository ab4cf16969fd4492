// A bucket budget's worker (tokenBucket, gcra): leases capacity with its share of the rate, renewed while the identifier is busy.

import type { Decision, Policy, StoreRequest } from '../types.js';
import { budgetBucketPolicy, budgetLeasePolicy } from './budget-bucket.js';
import { FloorLease } from './floor-lease.js';
import { type BucketLedgerSettings, floorGapWindowMs } from './ledger-bucket.js';
import { describeBudget } from './options.js';
import { type Tracked, Worker, type WorkerParts } from './worker.js';

/**
 * The part of `leaseMs` a region uses a lease for, from when it asked: the ledger holds it from
 * when it granted it, later, for the whole of `leaseMs`. What is left over covers processes of one
 * region whose clocks disagree by up to a tenth of it.
 */
const USE_FOR = 0.9;
/** Leases are renewed every third of `leaseMs`: two chances before one runs out. */
const RENEW_EVERY = 1 / 3;

interface BucketRecord extends Tracked {
  /** The capacity beyond the floor this process last wrote, and when it stops using it (clock). */
  lease: number;
  until: number;
  /** When this process last asked the ledger for it; -Infinity before it has. */
  sentAt: number;
  /** When to ask again. */
  renewAt: number;
  /** Units asked of this process since it last asked the ledger. */
  demand: number;
  /** Units per second the whole region asks, as the ledger last said. */
  regionRate: number;
  /** Tokens left in the region, as the last decision said. */
  remaining: number;
}

/** Leases of capacity (with its share of the rate) that follow each region's demand. */
export class BucketWorker extends Worker<BucketRecord> {
  readonly policy: Policy;
  override readonly floorOff: { readonly policy: Policy; holds(): boolean };
  readonly #lease: FloorLease;
  readonly #leaseMs: number;
  readonly #settings: BucketLedgerSettings;

  constructor(parts: WorkerParts, global: Policy) {
    super(parts);
    const { config } = parts;
    this.#leaseMs = config.leaseMs;
    this.#settings = {
      region: config.regionIndex,
      regions: config.regions.length,
      leaseMs: config.leaseMs,
      pool: config.limit - config.regions.length * config.floorUnits,
      tau: config.tauMs,
      floor: config.floorUnits,
    };
    const description = describeBudget(config, global);
    this.policy = budgetBucketPolicy(global, config.tauMs, config.floorUnits, description);
    // The floor is held as a lease, as for windows, its gaps kept in windows of half a lease. Back from
    // a lapse, a region waits a lease period (leases granted from its floor end) and the time to fill
    // (its floor then holds the tokens it would have refilled since): see docs/regions.md.
    const { ledger, clock, name } = parts;
    this.#lease = new FloorLease({
      ledger,
      key: ledger.regionsKeyFor(name),
      settings: {
        region: config.regionIndex,
        regions: config.regions.length,
        leaseMs: config.leaseMs,
        windowMs: floorGapWindowMs(config.leaseMs),
      },
      clock,
      report: (error) => parts.report(error, '', 'store-error'),
      waitAfterBackMs: config.leaseMs + config.tauMs,
    });
    const lease = this.#lease;
    // Without its floor: the bucket of its leases alone (capacity and rate beyond the floor).
    this.floorOff = {
      policy: budgetBucketPolicy(global, config.tauMs, 0, description),
      holds: () => lease.holds(clock()),
    };
  }

  override start(): void {
    this.#lease.start();
    super.start();
  }

  override close(): void {
    this.#lease.close();
    super.close();
  }

  protected track(identifier: string, tag: string | undefined, now: number): BucketRecord {
    return {
      identifier,
      tag,
      unreported: 0,
      seenAt: now,
      inFlight: false,
      lease: 0,
      until: 0,
      sentAt: Number.NEGATIVE_INFINITY,
      renewAt: now,
      demand: 0,
      regionRate: 0,
      remaining: Number.POSITIVE_INFINITY,
    };
  }

  protected observe(
    record: BucketRecord,
    cost: number,
    decision: Decision,
    now: number,
    fromStore: boolean,
  ): boolean {
    record.unreported += cost;
    record.demand += cost;
    if (fromStore) record.remaining = decision.remaining;
    if (now >= record.renewAt) return true;
    // Tokens running out: the ledger may lease more, once it has heard of the demand.
    const lowWater = Math.max(1, this.#settings.floor / 2);
    return record.remaining < lowWater && now - record.sentAt >= Math.max(4 * this.rttMs, this.#leaseMs / 20);
  }

  protected nextPass(now: number): number {
    return now + this.#leaseMs * (RENEW_EVERY / 2);
  }

  protected due(record: BucketRecord, now: number): boolean {
    return record.demand > 0 && now >= record.renewAt;
  }

  protected idle(record: BucketRecord, now: number): boolean {
    return now - record.seenAt > this.#leaseMs;
  }

  protected async exchange(records: readonly BucketRecord[], sentAt: number): Promise<void> {
    const { ledger } = this.parts;
    const units = records.map((record) => {
      const asked = record.unreported;
      record.unreported = 0;
      record.demand = 0;
      return asked;
    });
    const keys = records.map((record) => this.ledgerKey(record));
    let replies: Awaited<ReturnType<typeof ledger.bucket>>;
    try {
      // Whether it holds its floor as it asks: while it waits for it, it is leased its demand's whole capacity.
      const settings = { ...this.#settings, gaps: this.#lease.gaps, holdsFloor: this.floorOff.holds() };
      replies = await ledger.bucket(keys, settings, units, undefined);
    } catch (error) {
      records.forEach((record, i) => {
        record.unreported += units[i] as number;
      });
      throw error;
    }
    const until = sentAt + this.#leaseMs * USE_FOR;
    const policy = budgetLeasePolicy(until, this.#settings.tau);
    const writes: StoreRequest[] = [];
    records.forEach((record, i) => {
      const reply = replies[i];
      if (reply === undefined) return;
      record.sentAt = sentAt;
      record.renewAt = sentAt + this.#leaseMs * RENEW_EVERY;
      record.regionRate = reply.demandPerSecond;
      // A smaller lease waits while the larger one still holds past the next renewal: the ledger
      // keeps the larger reserved until it expires (later than this region stops using it), so no
      // other region could use what this one would leave idle meanwhile.
      if (reply.lease < record.lease && this.parts.clock() + this.#leaseMs * RENEW_EVERY < record.until)
        return;
      // A lease that did not change is written again all the same: its end moves on.
      if (reply.lease > 0 || record.lease > 0) writes.push(this.request(policy, record, reply.lease));
      record.lease = reply.lease;
      record.until = until;
    });
    await this.write(writes);
  }

  protected held(records: Iterable<BucketRecord>, now: number): { granted: number; demand: number } {
    let granted = 0;
    let demand = 0;
    for (const record of records) {
      if (now < record.until) granted += record.lease;
      demand += record.regionRate;
    }
    return { granted, demand };
  }
}
