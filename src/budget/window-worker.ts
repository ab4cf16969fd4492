// A window budget's worker (fixed or sliding): reports demand mid-window, claims the next window's share ahead, asks chunks when low.

import type { Decision, Policy, StoreRequest } from '../types.js';
import {
  budgetGrantPolicy,
  budgetReleasePolicy,
  budgetSyncPolicy,
  budgetWindowPolicy,
} from './budget-window.js';
import type { WindowLedgerRequest, WindowLedgerSettings } from './ledger-windows.js';
import { describeBudget } from './options.js';
import { type Tracked, Worker, type WorkerParts } from './worker.js';

/** Where in its window a region first gives back what it will not use (and again at every later pass). */
const RELEASE_AT = 0.25;
/** A region keeps what it admitted so far, at the rate so far, for the rest of the window, this many times over. */
const RELEASE_MARGIN = 1.5;
/** The smallest release worth a ledger entry, as a part of the grant. */
const MIN_RELEASE = 0.05;
/** Where in its window a region reports demand, so that every region's is in before shares are claimed. */
const REPORT_AT = 0.5;
/** Where in its window a region claims its share of the next: late enough to have seen demand, early enough for the round trip. */
const CLAIM_AT = 0.75;
/** A second chance to claim, for identifiers first seen after CLAIM_AT. */
const LATE_CLAIM_AT = 0.9;
/**
 * A chunk lasts this many round trips at the rate seen, and at least this part of a window: a
 * region asks for more when what is left would last half as long, a few times a window at most.
 */
const CHUNK_ROUND_TRIPS = 4;
const CHUNK_OF_WINDOW = 0.1;

interface WindowRecord extends Tracked {
  /** The window `demand`, `granted` and `remaining` are about. */
  window: number;
  /** Units asked of this process in that window. */
  demand: number;
  /** What the region holds for it (floor included), as far as this process knows. */
  granted: number;
  /** What it holds for the window after (its share, claimed ahead). */
  next: number;
  /** What is left of the grant in the region, as the last decision said; Infinity when unknown. */
  remaining: number;
  /** The last window in which this process reported mid-window, and claimed the next share. */
  reported: number;
  claimed: number;
  /** The last window in which the ledger had no more to give. */
  dry: number;
  /** The chunk asked by the call under way. */
  asked: number;
  /** Whether this process told the region's store what the ledger granted before (see syncBudgetWindow). */
  synced: boolean;
}

/** Grants per window: a region's share of each window claimed ahead, chunks of the reserve when it runs low. */
export class WindowWorker extends Worker<WindowRecord> {
  readonly policy: Policy;
  readonly #windowMs: number;
  readonly #floor: number;
  readonly #grantPolicies = new Map<number, Policy>();

  constructor(parts: WorkerParts, global: Policy) {
    super(parts);
    const { config } = parts;
    this.#windowMs = config.windowMs;
    this.#floor = config.floorUnits;
    this.policy = budgetWindowPolicy(global, config.floorUnits, describeBudget(config, global));
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
      reported: window - 1,
      claimed: window - 1,
      dry: window - 1,
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
    return record.dry !== record.window && record.remaining <= this.#lowWater(record, now);
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
    const requests = records.map((record, i) =>
      this.#request(record, sentAt, index, claiming, released[i] as number),
    );
    const settings: WindowLedgerSettings = {
      region: config.regionIndex,
      regions: config.regions.length,
      windowMs: this.#windowMs,
      limit: config.limit,
      floor: this.#floor,
      reservePermille: config.reservePermille,
      sliding: config.kind === 'sliding',
      index,
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
          this.request(budgetSyncPolicy(index, this.#windowMs), record, reply.granted - reply.gained),
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
    record.granted = record.window === index - 1 ? Math.max(this.#floor, record.next) : this.#floor;
    record.next = this.#floor;
    record.window = index;
    record.demand = 0;
    record.unreported = 0;
    record.remaining = Number.POSITIVE_INFINITY;
  }

  /** Units this process asks per ms of the window so far. */
  #rate(record: WindowRecord, now: number): number {
    return record.demand / Math.max(1, now - record.window * this.#windowMs);
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
    const start = record.window * this.#windowMs;
    const elapsed = Math.max(1, now - start);
    const left = Math.max(0, start + this.#windowMs - now);
    const admitted = Math.max(0, record.granted - record.remaining);
    const need = Math.ceil((admitted / elapsed) * left * RELEASE_MARGIN) + this.#lowWater(record, now);
    const surplus = Math.min(record.remaining - need, record.granted - this.#floor);
    return surplus >= Math.max(1, Math.ceil(record.granted * MIN_RELEASE)) ? surplus : 0;
  }

  /**
   * Gives back what the region will not use of this window: its store lowers the grant first (never
   * below what it admitted), then the ledger hears of what was given. Units per record.
   */
  async #release(records: readonly WindowRecord[], index: number, now: number): Promise<number[]> {
    const amounts = records.map((record) => (record.window === index ? this.#surplus(record, now) : 0));
    if (amounts.every((amount) => amount === 0)) return amounts;
    const policy = budgetReleasePolicy(index, this.#windowMs);
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
    const claim = claiming && record.claimed < index;
    if (claim) record.claimed = index;
    else if (now - index * this.#windowMs >= REPORT_AT * this.#windowMs) record.reported = index;
    return { demand, want, claim, release };
  }

  /** Writes into the region's store what the ledger granted beyond what this process knew. */
  #apply(record: WindowRecord, index: number, granted: number, next: number, writes: StoreRequest[]): void {
    if (record.window !== index) return;
    if (record.asked > 0 && granted <= record.granted) record.dry = index;
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
      policy = budgetGrantPolicy(target, this.#windowMs);
      this.#grantPolicies.set(target, policy);
    }
    return policy;
  }
}
