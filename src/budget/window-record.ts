// A window budget worker's record of one identifier, and the thresholds that pace its ledger calls.

import type { Tracked } from './worker.js';

/** Where in its window a region first gives back what it will not use (and again at every later pass). */
export const RELEASE_AT = 0.25;
/** A region keeps what it admitted so far, at the rate so far, for the rest of the window, this many times over. */
export const RELEASE_MARGIN = 1.5;
/**
 * The same for a sliding window, whose region also keeps its previous window's weight: what it
 * holds beyond that margin is what keeps a hungrier region from reaching the limit.
 */
export const SLIDING_RELEASE_MARGIN = 1.2;
/** The smallest release worth a ledger entry, as a part of the grant. */
export const MIN_RELEASE = 0.05;
/** Where in its window a region reports demand, so that every region's is in before shares are claimed. */
export const REPORT_AT = 0.5;
/** Where in its window a region claims its share of the next: late enough to have seen demand, early enough for the round trip. */
export const CLAIM_AT = 0.75;
/** A second chance to claim, for identifiers first seen after CLAIM_AT. */
export const LATE_CLAIM_AT = 0.9;
/**
 * A chunk lasts this many round trips at the rate seen, and at least this part of a window: a
 * region asks for more when what is left would last half as long, a few times a window at most.
 */
export const CHUNK_ROUND_TRIPS = 4;
export const CHUNK_OF_WINDOW = 0.1;

export interface WindowRecord extends Tracked {
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
  /**
   * A sliding window: what the region had used of its grant in the window before, as its last
   * decision there said (about what it admitted), 0 when unknown; the part of its estimate that
   * falls away as the window goes on.
   */
  previousUsed: number;
  /** The last window in which this process reported mid-window, and claimed the next share. */
  reported: number;
  claimed: number;
  /**
   * A sliding window: the last window in which it topped its claim up at LATE_CLAIM_AT (what it was
   * granted since the claim: a region holding less for the next window than it admits in this one
   * admits nothing there until the weight falls).
   */
  toppedUp: number;
  /** The last window in which the ledger had no more to give. */
  dry: number;
  /**
   * A sliding window's room opens as the previous window's weight falls: when (on the clock) a
   * region the ledger had nothing for asks again.
   */
  retryAt: number;
  /** The chunk asked by the call under way. */
  asked: number;
  /** A sliding window: the last window whose predecessor's admitted count the ledger heard of. */
  toldBefore: number;
  /** Whether this process told the region's store what the ledger granted before (see syncBudgetWindow). */
  synced: boolean;
}
