// A window budget's worker (fixed or sliding): reports demand mid-window, claims the next window's share ahead, asks chunks when low.

import type { Decision, Policy, StoreRequest } from '../types.js';
import {
  budgetGrantPolicy,
  budgetReleasePolicy,
  budgetSyncPolicy,
  budgetWindowPolicy,
} from './budget-window.js';
import { FloorLease } from './floor-lease.js';
import type { WindowLedgerRequest, WindowLedgerSettings } from './ledger-windows.js';
import { describeBudget } from './options.js';
import {
  CHUNK_OF_WINDOW,
  CHUNK_ROUND_TRIPS,
  CLAIM_AT,
  LATE_CLAIM_AT,
  MIN_RELEASE,
  RELEASE_AT,
  RELEASE_MARGIN,
  REPORT_AT,
  SLIDING_RELEASE_MARGIN,
  type WindowRecord,
} from './window-record.js';
import { Worker, type WorkerParts } from './worker.js';

/** Grants per window: a region's share of each window claimed ahead, chunks of the reserve when it runs low. */
export class WindowWorker extends Worker<WindowRecord> {
  readonly policy: Policy;
  override readonly floorOff: { readonly policy: Policy; holds(): boolean };
  readonly #lease: FloorLease;
  readonly #windowMs: number;
  readonly #floor: number;
  readonly #sliding: boolean;
  readonly #grantPolicies = new Map<number, Policy>();

  constructor(parts: WorkerParts, global: Policy) {
    super(parts);
    const { config } = parts;
    this.#windowMs = config.windowMs;
    this.#floor = config.floorUnits;
    this.#sliding = config.kind === 'sliding';
    const description = describeBudget(config, global);
    this.policy = budgetWindowPolicy(global, config.floorUnits, description, this.#sliding);
    const { ledger, clock, name } = parts;
    this.#lease = new FloorLease({
      ledger,
      key: ledger.regionsKeyFor(name),
      settings: {
        region: config.regionIndex,
        regions: config.regions.length,
        leaseMs: config.leaseMs,
        windowMs: config.windowMs,
      },
      clock,
      report: (error) => parts.report(error, '', 'store-error'),
    });
    const lease = this.#lease;
    this.floorOff = {
      policy: budgetWindowPolicy(global, config.floorUnits, description, this.#sliding, true),
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

  protected track(identifier: string, tag: string | undefined, now: number): WindowRecord {
    const window = this.#index(now);
    const floor = this.#floor;
    return {
      identifier,
      tag,
      unreported: 0,
      seenAt: now,
      inFlight: false,
      window,
      demand: 0,
      granted: floor,
      next: floor,
      remaining: Number.POSITIVE_INFINITY,
      previousUsed: 0,
      reported: window - 1,
      claimed: window - 1,
      toppedUp: window - 1,
      dry: window - 1,
      retryAt: 0,
      toldBefore: window - 1,
      asked: 0,
      synced: false,
    };
  }

  protected observe(
    record: WindowRecord,
    cost: number,
    decision: Decision,
    now: number,
    fromStore: boolean,
  ): boolean {
    this.#roll(record, now);
    record.demand += cost;
    record.unreported += cost;
    if (fromStore) record.remaining = decision.remaining;
    return this.#mayAsk(record, now) && record.remaining <= this.#lowWater(record, now);
  }

  /** Whether a region running low asks now: not again in a window the ledger had nothing more for (a sliding one: not before retryAt). */
  #mayAsk(record: WindowRecord, now: number): boolean {
    if (record.dry !== record.window) return true;
    return this.#sliding && now >= record.retryAt;
  }

  protected nextPass(now: number): number {
    const start = this.#index(now) * this.#windowMs;
    for (const at of [RELEASE_AT, REPORT_AT, CLAIM_AT, LATE_CLAIM_AT, 1 + RELEASE_AT]) {
      const time = start + Math.ceil(at * this.#windowMs);
      if (time > now) return time;
    }
    return start + this.#windowMs;
  }

  protected due(record: WindowRecord, now: number): boolean {
    this.#roll(record, now);
    if (this.#surplus(record, now) > 0) return true;
    if (record.demand === 0) return false;
    // A region the ledger had nothing more for asks again: others may have given some back since.
    if (record.remaining <= this.#lowWater(record, now)) return true;
    const elapsed = now - record.window * this.#windowMs;
    if (this.#sliding && elapsed >= LATE_CLAIM_AT * this.#windowMs && record.toppedUp < record.window) {
      return true;
    }
    if (elapsed >= CLAIM_AT * this.#windowMs) return record.claimed < record.window;
    return elapsed >= REPORT_AT * this.#windowMs && record.reported < record.window;
  }

  protected idle(record: WindowRecord, now: number): boolean {
    return now - record.seenAt > 2 * this.#windowMs;
  }

  protected async exchange(records: readonly WindowRecord[], sentAt: number): Promise<void> {
    const { ledger, config } = this.parts;
    const index = this.#index(sentAt);
    const claiming = sentAt - index * this.#windowMs >= CLAIM_AT * this.#windowMs;
    const released = await this.#release(records, index, sentAt);
    // The ledger lowers the window before to what was admitted less the floor as this process's view
    // counts it there: only a process that holds its floor's lease knows its own region's gap.
    const before =
      this.#sliding && this.#lease.holds(sentAt) ? await this.#admittedBefore(records, index) : undefined;
    const requests = records.map((record, i) => ({
      ...this.#request(record, sentAt, index, claiming, released[i] as number),
      before: before?.[i] ?? -1,
    }));
    const settings: WindowLedgerSettings = {
      region: config.regionIndex,
      regions: config.regions.length,
      windowMs: this.#windowMs,
      limit: config.limit,
      floor: this.#floor,
      reservePermille: config.reservePermille,
      sliding: config.kind === 'sliding',
      index,
      gaps: this.#lease.gaps,
    };
    const keys = records.map((record) => this.ledgerKey(record));
    let replies: Awaited<ReturnType<typeof ledger.windows>>;
    try {
      replies = await ledger.windows(keys, settings, requests, undefined);
    } catch (error) {
      records.forEach((record, i) => {
        record.unreported += (requests[i] as WindowLedgerRequest).demand;
      });
      throw error;
    }
    const writes: StoreRequest[] = [];
    records.forEach((record, i) => {
      const reply = replies[i];
      if (reply === undefined) return;
      if (!record.synced) {
        // Once per identifier in this process: a store that lost what the ledger granted counts it as used.
        record.synced = true;
        writes.push(
          this.request(
            budgetSyncPolicy(index, this.#windowMs, this.#sliding),
            record,
            reply.granted - reply.gained,
          ),
        );
      }
      this.#apply(record, index, reply.granted, reply.next, writes);
    });
    await this.write(writes);
  }

  protected held(records: Iterable<WindowRecord>, now: number): { granted: number; demand: number } {
    const index = this.#index(now);
    let granted = 0;
    let demand = 0;
    for (const record of records) {
      if (record.window !== index) continue;
      granted += record.granted - this.#floor;
      demand += record.demand;
    }
    return { granted, demand };
  }

  #index(now: number): number {
    return Math.floor(now / this.#windowMs);
  }

  /** Moves a record to the window `now` falls in: what was claimed for it becomes its grant. */
  #roll(record: WindowRecord, now: number): void {
    const index = this.#index(now);
    if (record.window === index) return;
    const before = record.window === index - 1;
    const used = record.remaining === Number.POSITIVE_INFINITY ? 0 : record.granted - record.remaining;
    record.previousUsed = before ? Math.max(0, used) : 0;
    record.granted = before ? Math.max(this.#floor, record.next) : this.#floor;
    record.next = this.#floor;
    record.window = index;
    record.demand = 0;
    record.unreported = 0;
    record.remaining = Number.POSITIVE_INFINITY;
  }

  /**
   * Units this process asks per ms of the window so far, measured over at least half a chunk's
   * time: the first few units of a window say little of the rate (one unit 8 ms in reads as 125 a
   * second for a region asked 50), and a region that took them at their word asked for most of the
   * reserve it did not need, then gave it back too late for the others to use.
   */
  #rate(record: WindowRecord, now: number): number {
    return record.demand / Math.max(1, now - record.window * this.#windowMs, this.#chunkMs() / 2);
  }

  /** How long a chunk should last at the rate seen, in ms. */
  #chunkMs(): number {
    return Math.max(this.rttMs * CHUNK_ROUND_TRIPS, this.#windowMs * CHUNK_OF_WINDOW);
  }

  /** Asks again when what is left would last half as long as a chunk at the rate seen. */
  #lowWater(record: WindowRecord, now: number): number {
    return Math.max(1, Math.ceil((this.#rate(record, now) * this.#chunkMs()) / 2));
  }

  /**
   * Units of the window's grant the region will not use, at the rate it admitted so far (the whole
   * region's: the grant and what is left of it are the region's), with a margin; 0 when too few.
   */
  #surplus(record: WindowRecord, now: number): number {
    if (record.remaining === Number.POSITIVE_INFINITY || record.granted <= this.#floor) return 0;
    // Without its floor's lease, what the region admitted may have taken units the ledger counts as
    // granted beyond the floor: it gives nothing back (given back, they could be admitted twice).
    if (!this.#lease.holds(now)) return 0;
    const start = record.window * this.#windowMs;
    const elapsed = Math.max(1, now - start);
    const left = Math.max(0, start + this.#windowMs - now);
    const used = Math.max(0, record.granted - record.remaining);
    let surplus: number;
    if (this.#sliding) {
      // The estimate falls as the previous window's weight does; what this window admits stays:
      // the grant must cover the larger of the estimate now and at the window's end.
      const admitted = Math.max(0, used - (record.previousUsed * left) / this.#windowMs);
      const need = Math.max(used, admitted + (admitted / elapsed) * left * SLIDING_RELEASE_MARGIN);
      surplus = record.granted - Math.ceil(need) - this.#lowWater(record, now);
    } else {
      const need = Math.ceil((used / elapsed) * left * RELEASE_MARGIN) + this.#lowWater(record, now);
      surplus = record.remaining - need;
    }
    surplus = Math.min(surplus, record.granted - this.#floor);
    return surplus >= Math.max(1, Math.ceil(record.granted * MIN_RELEASE)) ? surplus : 0;
  }

  /**
   * Gives back what the region will not use of this window: its store lowers the grant first (never
   * below what it admitted), then the ledger hears of what was given. Units per record.
   */
  async #release(records: readonly WindowRecord[], index: number, now: number): Promise<number[]> {
    const amounts = records.map((record) => (record.window === index ? this.#surplus(record, now) : 0));
    if (amounts.every((amount) => amount === 0)) return amounts;
    const policy = budgetReleasePolicy(index, this.#windowMs, this.#sliding);
    const asking = records.filter((_, i) => (amounts[i] as number) > 0);
    const results = await this.write(
      asking.map((record) => this.request(policy, record, amounts[records.indexOf(record)] as number)),
    );
    const given = new Map<WindowRecord, number>();
    asking.forEach((record, i) => {
      given.set(record, results[i]?.remaining ?? 0);
    });
    return records.map((record) => {
      const units = given.get(record) ?? 0;
      record.granted -= units;
      record.remaining = Math.max(0, record.remaining - units);
      return units;
    });
  }

  /**
   * A sliding window, once per window and identifier: what the region admitted in the window before
   * (its store has moved on, so no more can be), read from the store; -1 where not known. The ledger
   * lowers that window's grant to it, so that it weighs what was admitted in the estimate.
   */
  async #admittedBefore(records: readonly WindowRecord[], index: number): Promise<number[]> {
    const asking = records.filter((record) => record.toldBefore < index && record.window === index);
    if (asking.length === 0) return records.map(() => -1);
    const policy = budgetReleasePolicy(index - 1, this.#windowMs, true);
    // Amount 0: should the store's clock still be in the window before, nothing is given back.
    const results = await this.write(asking.map((record) => this.request(policy, record, 0)));
    const known = new Map<WindowRecord, number>();
    asking.forEach((record, i) => {
      const result = results[i];
      if (result?.remaining !== 1) return;
      known.set(record, result.resetMs);
      record.toldBefore = index;
    });
    return records.map((record) => known.get(record) ?? -1);
  }

  #request(
    record: WindowRecord,
    now: number,
    index: number,
    claiming: boolean,
    release: number,
  ): WindowLedgerRequest {
    this.#roll(record, now);
    const demand = record.unreported;
    record.unreported = 0;
    const low = release === 0 && record.remaining <= this.#lowWater(record, now);
    const rate = this.#rate(record, now);
    const left = (index + 1) * this.#windowMs - now;
    // Enough for a chunk's time at the rate seen, never more than the rest of the window wants.
    const want = low ? Math.max(1, Math.min(Math.ceil(rate * this.#chunkMs()), Math.ceil(rate * left))) : 0;
    record.asked = want;
    const late = this.#sliding && now - index * this.#windowMs >= LATE_CLAIM_AT * this.#windowMs;
    const claim = claiming && (record.claimed < index || (late && record.toppedUp < index));
    if (claim) {
      record.claimed = index;
      if (late) record.toppedUp = index;
    } else if (now - index * this.#windowMs >= REPORT_AT * this.#windowMs) record.reported = index;
    return { demand, want, claim, release };
  }

  /** Writes into the region's store what the ledger granted beyond what this process knew. */
  #apply(record: WindowRecord, index: number, granted: number, next: number, writes: StoreRequest[]): void {
    if (record.window !== index) return;
    if (record.asked > 0 && granted <= record.granted) {
      record.dry = index;
      // A quarter of a chunk's time: the room a sliding window opens meanwhile is worth a call.
      record.retryAt = this.parts.clock() + this.#chunkMs() / 4;
    }
    if (granted > record.granted) {
      writes.push(this.request(this.#grantPolicy(index), record, granted));
      record.remaining += granted - record.granted;
      record.granted = granted;
    }
    if (next > record.next) {
      writes.push(this.request(this.#grantPolicy(index + 1), record, next));
      record.next = next;
    }
  }

  #grantPolicy(target: number): Policy {
    let policy = this.#grantPolicies.get(target);
    if (policy === undefined) {
      // Two targets are in use at a time: the current window and the next.
      if (this.#grantPolicies.size >= 4) this.#grantPolicies.clear();
      policy = budgetGrantPolicy(target, this.#windowMs, this.#sliding);
      this.#grantPolicies.set(target, policy);
    }
    return policy;
  }
}
