// The region leases of a window budget: the pure twin of ledger-regions.lua, one hash per budget saying which regions' floors the ledger may lend.
import type { LedgerFields, LedgerOutcome } from './ledger-windows.js';

/** What every renewal of one budget shares. */
export interface RegionLeaseSettings {
  /** The renewing region, by its place in the budget's `regions`. */
  readonly region: number;
  readonly regions: number;
  /** How long a renewal holds the region's floor, on the global store's clock. */
  readonly leaseMs: number;
  readonly windowMs: number;
}

/**
 * Windows `[out, back)` in which a region's floor is out of the ledger's sums: it admits nothing on
 * its floor there, whatever it does later. `out` is -1 when none.
 */
export interface FloorGap {
  readonly out: number;
  readonly back: number;
}

/** What a renewal answers: the global store's time, and each region's gap (see FloorGap). */
export interface RegionLeaseReply {
  readonly now: number;
  readonly gaps: readonly FloorGap[];
}

const NONE: FloorGap = Object.freeze({ out: -1, back: -1 });

/**
 * A region's gap as the ledger may use it from `now` on. A region whose lease lapsed (`now` at or
 * past `u:<s>`) admits on its floor in no window starting at or after its lease's end, until it
 * comes back, and a region that comes back waits for the window after next: `[ceil(u / W),
 * floor(now / W) + 2)`. One that came back keeps the gap it left (`o:<s>`, `b:<s>`).
 */
function gapOf(fields: LedgerFields, s: number, now: number, windowMs: number): FloorGap {
  const until = fields.get(`u:${s}`);
  if (until !== undefined && now >= until) {
    return { out: Math.ceil(until / windowMs), back: Math.floor(now / windowMs) + 2 };
  }
  const out = fields.get(`o:${s}`);
  const back = fields.get(`b:${s}`);
  return out === undefined || back === undefined ? NONE : { out, back };
}

/**
 * Renews the region's lease for `leaseMs` from `now`. A region whose lease had lapsed comes back:
 * its gap is kept (`o`, `b`) so that it uses its floor again only from the window after next, when
 * every grant the ledger made from that floor meanwhile has ended. Answers every region's gap.
 */
export function regionLeases(
  stored: LedgerFields,
  now: number,
  settings: RegionLeaseSettings,
): LedgerOutcome<RegionLeaseReply> {
  const { region, regions, leaseMs, windowMs } = settings;
  const fields: LedgerFields = new Map(stored);
  const until = fields.get(`u:${region}`);
  if (until !== undefined && now >= until) {
    const gap = gapOf(fields, region, now, windowMs);
    fields.set(`o:${region}`, gap.out);
    fields.set(`b:${region}`, gap.back);
  }
  fields.set(`u:${region}`, Math.ceil(now + leaseMs));
  const gaps: FloorGap[] = [];
  for (let s = 0; s < regions; s++) gaps.push(gapOf(fields, s, now, windowMs));
  return { fields, ttlMs: 3 * Math.max(leaseMs, windowMs), reply: { now: Math.floor(now), gaps } };
}

/** The floor region `s` holds in `window`, as the ledger counts it: none in a gap. */
export function floorIn(
  gaps: readonly FloorGap[] | undefined,
  s: number,
  window: number,
  floor: number,
): number {
  const gap = gaps?.[s];
  return gap !== undefined && gap.out >= 0 && window >= gap.out && window < gap.back ? 0 : floor;
}

/** Gaps as a ledger call carries them: `s:out:back` for each region that has one, comma-separated. */
export function gapsArgument(gaps: readonly FloorGap[] | undefined): string {
  if (gaps === undefined) return '';
  const parts: string[] = [];
  gaps.forEach((gap, s) => {
    if (gap.out >= 0) parts.push(`${s}:${gap.out}:${gap.back}`);
  });
  return parts.join(',');
}
