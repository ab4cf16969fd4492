// The ledger of a window budget (fixed or sliding): the pure twin of ledger-windows.lua, one identifier's grants and demand.
import { type FloorGap, floorIn } from './ledger-regions.js';

/**
 * One identifier's ledger: `g:<window>:<region>` units granted to a region beyond its floor, and
 * `d:<window>:<region>` units it reported asked of it, for the windows from the ledger's previous one
 * on. Regions are numbered by their place in the budget's `regions`.
 */
export type LedgerFields = Map<string, number>;

/** What every request of one ledger call shares: who asks, the budget, and the asker's window. */
export interface WindowLedgerSettings {
  readonly region: number;
  readonly regions: number;
  readonly windowMs: number;
  readonly limit: number;
  /** What each region may admit in every window without asking: granted to all, always. */
  readonly floor: number;
  /** Thousandths of the grantable units kept out of the shares, for chunks asked when a region runs low. */
  readonly reservePermille: number;
  /** A sliding window: a grant must keep `previous × (1 − elapsed) + current` within the limit. */
  readonly sliding: boolean;
  /** The asker's window, on its clock. */
  readonly index: number;
  /**
   * Each region's floor gap as the asker last read it (see ledger-regions.ts): windows in which a
   * region admits nothing on its floor, so the ledger leaves that floor out of its sums. Absent or
   * an empty list: every floor counts.
   */
  readonly gaps?: readonly FloorGap[] | undefined;
}

/** What a region asks for one identifier. */
export interface WindowLedgerRequest {
  /** Units asked of the region in its window since it last said. */
  readonly demand: number;
  /** Units wanted now for its window (a chunk of the reserve), 0 for none. */
  readonly want: number;
  /** Whether to claim the region's share of the next window, from the demand reported in this one. */
  readonly claim: boolean;
  /** Units of its window's grant the region gives back (it lowered its own grant first), 0 for none. */
  readonly release: number;
  /**
   * A sliding window: what the region admitted in the window before its own, once its store has
   * moved on (it can admit no more there), or -1 when not known. That window's grant is lowered to
   * it, so that its weight in the estimate is what was admitted, not what was granted.
   */
  readonly before?: number;
}

/**
 * What the region holds after the call: its grants (floor included) for its window and the next,
 * all regions' for its window, and what this call granted it for its window (`granted - gained` is
 * what it was granted before, which a region that lost its store counts as used).
 */
export interface WindowLedgerReply {
  readonly granted: number;
  readonly next: number;
  readonly total: number;
  readonly gained: number;
}

export interface LedgerOutcome<R> {
  readonly fields: LedgerFields;
  /** How long to keep the fields; they are deleted when there are none. */
  readonly ttlMs: number;
  readonly reply: R;
}

const FIELD = /^([gd]):(\d+):(\d+)$/;

/** The fields of windows before the ledger's previous one are of no use to any rule: dropped. */
function pruned(fields: LedgerFields, current: number): LedgerFields {
  const kept: LedgerFields = new Map();
  for (const [name, value] of fields) {
    const match = FIELD.exec(name);
    if (match !== null && Number(match[2]) >= current - 1) kept.set(name, value);
  }
  return kept;
}

/**
 * Records a region's demand and what it gives back, grants it a chunk of its window and its share
 * of the next, as far as the limit allows, and answers what it holds. The ledger alone grants every unit a region admits
 * beyond its floor, so the sum over regions never passes the limit: for a fixed window, floors and
 * grants of one window add up to at most `limit`; for a sliding window (each region keeping its own
 * estimate within its grant), every grant keeps `Σ max(G(window), G(window − 1) × (1 − elapsed))` and
 * `Σ max(G(window), G(window + 1))` over regions within `limit`, G being a region's floor and grant,
 * and grants no window before the ledger's own (see docs/regions.md for the proof).
 */
export function windowLedger(
  stored: LedgerFields,
  now: number,
  settings: WindowLedgerSettings,
  request: WindowLedgerRequest,
): LedgerOutcome<WindowLedgerReply> {
  const { region, regions, windowMs, limit, floor, sliding, index, gaps } = settings;
  const current = Math.floor(now / windowMs);
  const fields = pruned(stored, current);
  const value = (name: string): number => fields.get(name) ?? 0;
  const sum = (kind: string, window: number): number => {
    let total = 0;
    for (let s = 0; s < regions; s++) total += value(`${kind}:${window}:${s}`);
    return total;
  };
  // A region's floor in a window, as the sums count it: none in its gap (see ledger-regions.ts).
  const floorOf = (window: number, s: number): number => floorIn(gaps, s, window, floor);
  const floors = (window: number): number => {
    let total = 0;
    for (let s = 0; s < regions; s++) total += floorOf(window, s);
    return total;
  };
  const total = (window: number): number => floors(window) + sum('g', window);
  const grant = (window: number, s: number): number => floorOf(window, s) + value(`g:${window}:${s}`);
  // See available() in ledger-windows.lua: the same sums, in the same order.
  const available = (window: number): number => {
    if (!sliding) return limit - total(window);
    let elapsed = (now - window * windowMs) / windowMs;
    if (elapsed < 0) elapsed = 0;
    else if (elapsed > 1) elapsed = 1;
    const weight = 1 - elapsed;
    let before = 0;
    let after = 0;
    for (let s = 0; s < regions; s++) {
      if (s === region) continue;
      before += Math.max(grant(window, s), grant(window - 1, s) * weight);
      after += Math.max(grant(window, s), grant(window + 1, s));
    }
    const mine = grant(window, region);
    if (grant(window - 1, region) * weight > limit - before || grant(window + 1, region) > limit - after) {
      return 0;
    }
    return Math.min(Math.floor(limit - before) - mine, limit - after - mine);
  };
  const add = (name: string, amount: number): void => {
    fields.set(name, value(name) + amount);
  };
  const mine = `g:${index}:${region}`;
  const mineNext = `g:${index + 1}:${region}`;
  let gained = 0;
  if (index >= current - 1 && index <= current + 1) {
    if (request.demand > 0) add(`d:${index}:${region}`, request.demand);
    if (request.release > 0) fields.set(mine, Math.max(0, value(mine) - request.release));
    const before = request.before ?? -1;
    const mineBefore = `g:${index - 1}:${region}`;
    if (sliding && before >= 0 && fields.has(mineBefore)) {
      fields.set(mineBefore, Math.min(value(mineBefore), Math.max(0, before - floorOf(index - 1, region))));
    }
    // A sliding window's past cannot take more: its weight in the estimate was counted without it.
    if (request.want > 0 && (!sliding || index >= current)) {
      const granted = Math.min(request.want, available(index));
      if (granted > 0) {
        add(mine, granted);
        gained = granted;
      }
    }
    if (request.claim) {
      let target = share(settings, sum, value, floors(index + 1));
      // See the claim in ledger-windows.lua: a sliding region keeps what it holds and was asked for.
      if (sliding) target = Math.max(target, Math.min(value(mine), askedInWindow(fields, now, settings)));
      const granted = Math.min(target - value(mineNext), available(index + 1));
      if (granted > 0) add(mineNext, granted);
    }
  }
  return {
    fields,
    ttlMs: Math.ceil((current + 3) * windowMs - now),
    reply: { granted: floor + value(mine), next: floor + value(mineNext), total: total(index), gained },
  };
}

/**
 * A sliding window: what the asker is asked for in its whole window beyond its floor (granted
 * apart), from the demand it reported so far at the rate so far (at least half the window counts as
 * elapsed, at most all of it: the ledger's clock may differ from the region's).
 */
function askedInWindow(fields: LedgerFields, now: number, settings: WindowLedgerSettings): number {
  const { region, windowMs, floor, index } = settings;
  const elapsed = Math.min(windowMs, Math.max(windowMs / 2, now - index * windowMs));
  return Math.ceil(((fields.get(`d:${index}:${region}`) ?? 0) * windowMs) / elapsed) - floor;
}

/**
 * A region's share of the next window beyond its floor: the grantable units less the reserve, in
 * the part of this window's demand (the last one's when none was reported yet) that was its own;
 * `floors` are the next window's, as the sums count them (a lapsed region's is lent).
 */
function share(
  settings: WindowLedgerSettings,
  sum: (kind: string, window: number) => number,
  value: (name: string) => number,
  floors: number,
): number {
  const { region, regions, limit, reservePermille, index } = settings;
  const pool = limit - floors;
  let window = index;
  let demand = sum('d', window);
  if (demand === 0) {
    window = index - 1;
    demand = sum('d', window);
  }
  if (demand === 0) return Math.floor((pool * (1000 - reservePermille)) / (1000 * regions));
  return Math.floor((pool * (1000 - reservePermille) * value(`d:${window}:${region}`)) / (1000 * demand));
}
