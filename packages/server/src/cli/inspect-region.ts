// `sluice inspect --global-redis`: a region's own state of a budget (what it admitted and holds), as its Redis keeps it.
import type { RawState } from './decode.js';
import { formatDuration, formatNumber } from './output.js';

/** A region's state of a window budget: its window, what it admitted, and what it holds for it and the next. */
export interface RegionWindowView {
  readonly regionWindow: number;
  readonly count: number;
  readonly grant: number;
  readonly next: number;
  /** A sliding window's count of the window before (absent for a fixed one). */
  readonly previous?: number;
}

/** A region's state of a bucket budget (a token bucket's or GCRA's): its tokens, its floor, and the lease it holds. */
export interface RegionBucketView {
  /** Tokens at `lastMs`; -1 for a full floor (a lease written before any decision). */
  readonly tokens: number;
  /** When `tokens` were counted (the server's clock, epoch ms). */
  readonly lastMs: number;
  /** The floor's capacity, which the region holds without asking. */
  readonly floor: number;
  /** Capacity leased beyond the floor (with its share of the rate), until `leasedUntilMs`. */
  readonly leased: number;
  readonly leasedUntilMs: number;
}

/** The region's state of a window budget (`"<window>:<count>:<grant>:<next>"`, a sliding one's then `:<previous>`), or undefined for another. */
export function regionWindowState(raw: RawState): RegionWindowView | undefined {
  if (!('value' in raw)) return undefined;
  const match = /^(\d+):(\d+):(\d+):(\d+)(?::(\d+))?$/.exec(raw.value);
  if (match === null) return undefined;
  const [regionWindow, count, grant, next] = match.slice(1, 5).map(Number) as [
    number,
    number,
    number,
    number,
  ];
  const view = { regionWindow, count, grant, next };
  return match[5] === undefined ? view : { ...view, previous: Number(match[5]) };
}

/** The region's state of a bucket budget (`"<tokens>:<last>:<extra>:<until>:<base>"`), or undefined for another. */
export function regionBucketState(raw: RawState): RegionBucketView | undefined {
  if (!('value' in raw)) return undefined;
  const parts = raw.value.split(':');
  if (parts.length !== 5) return undefined;
  const [tokens, lastMs, leased, leasedUntilMs, floor] = parts.map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  if (![tokens, lastMs, leased, leasedUntilMs, floor].every(Number.isFinite)) return undefined;
  return { tokens, lastMs, floor, leased, leasedUntilMs };
}

/** A region's state of a budget, whichever its kind: read as a window's, then as a bucket's. */
export function regionState(raw: RawState): RegionWindowView | RegionBucketView | undefined {
  return regionWindowState(raw) ?? regionBucketState(raw);
}

/** A region's state in words. */
export function regionStateText(state: RegionWindowView | RegionBucketView, nowMs: number): string {
  if ('regionWindow' in state) {
    const next = state.next > 0 ? `; ${state.next} claimed for the next window` : '';
    const previous = state.previous === undefined ? '' : `; ${state.previous} in the window before`;
    return `window ${state.regionWindow}: ${state.count} admitted of the ${state.grant} this region holds (floor included)${next}${previous}`;
  }
  const tokens = state.tokens < 0 ? 'a full floor' : `${formatNumber(state.tokens, 3)} tokens`;
  const leftMs = state.leasedUntilMs - nowMs;
  const lease =
    state.leased > 0 && leftMs > 0
      ? ` + ${state.leased} leased for ${formatDuration(leftMs)}`
      : ', no lease held';
  return `${tokens} as of ${formatDuration(Math.max(0, nowMs - state.lastMs))} ago; capacity: floor ${state.floor}${lease}`;
}
