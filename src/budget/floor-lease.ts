// A budget region's lease on its floor: renewed in the global store by every process of the region, so that a dead region's floor returns to the others.
import { storeError } from '../core/index.js';
import type { SluiceError } from '../errors.js';
import type { Ledger } from './ledger.js';
import type { FloorGap, RegionLeaseReply, RegionLeaseSettings } from './ledger-regions.js';

/** A process uses its floor until this part of a lease after it sent the renewal: the rest covers clocks that disagree. */
const HELD_PART = 0.9;
/** Renewals per lease period. */
const RENEWALS = 3;

/** What a floor lease needs from its worker. */
export interface FloorLeaseParts {
  readonly ledger: Ledger;
  readonly key: string;
  readonly settings: RegionLeaseSettings;
  /** This process's clock (the limiter's), on which the lease's end is kept. */
  readonly clock: () => number;
  readonly report: (error: SluiceError) => void;
  /**
   * Back from a lapse, how long after the start of the gap's `back` window the floor is still not
   * used: 0 for windows (a grant is for one window); for buckets, a lease period (a lease granted
   * from the floor before `back` holds until then) and the bucket's time to fill (what a floor held
   * since then would have refilled).
   */
  readonly waitAfterBackMs?: number;
}

/**
 * Every process of a region renews the region's lease every third of `leaseMs`; the ledger lends a
 * region's floor only in windows starting after its lease ended (see ledger-regions.ts). So a
 * process uses its floor only while its own last renewal holds, until 0.9 × `leaseMs` after it sent
 * it, and, when the region came back from a lapse, not before the window from which its floor
 * counts again (a tenth of a lease into it: clocks may disagree by that much). Until its first
 * renewal is answered, a process does not know whether its region lapsed: it holds no floor.
 */
export class FloorLease {
  readonly #parts: FloorLeaseParts;
  /** Until when (clock) this process may use its floor, and from when. */
  #until = Number.NEGATIVE_INFINITY;
  #from = 0;
  #gaps: readonly FloorGap[] | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Renewals sent, and those that failed. */
  renewals = 0;
  failures = 0;

  constructor(parts: FloorLeaseParts) {
    this.#parts = parts;
  }

  /** Whether this process may use its floor at `now` (its clock). */
  holds(now: number): boolean {
    return now < this.#until && now >= this.#from;
  }

  /** Each region's floor gap as last read, for the ledger's calls (undefined before the first answer). */
  get gaps(): readonly FloorGap[] | undefined {
    return this.#gaps;
  }

  /** Renews now (answered at once by a ledger in this process), then every third of a lease. */
  start(): void {
    this.#renew();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  readonly #renew = (): void => {
    this.#timer = undefined;
    if (this.#closed) return;
    const { ledger, key, settings, clock } = this.#parts;
    const sentAt = clock();
    this.renewals++;
    const now = ledger.regionsNow?.(key, settings);
    if (now !== undefined) this.#renewed(now, sentAt);
    else {
      ledger.regions(key, settings, undefined).then(
        (reply) => this.#renewed(reply, sentAt),
        (error: unknown) => {
          this.failures++;
          this.#parts.report(storeError('global', error));
        },
      );
    }
    const timer = setTimeout(this.#renew, Math.max(1, Math.floor(settings.leaseMs / RENEWALS)));
    timer.unref();
    this.#timer = timer;
  };

  #renewed(reply: RegionLeaseReply, sentAt: number): void {
    if (this.#closed) return;
    const { leaseMs, windowMs, region } = this.#parts.settings;
    this.#until = Math.max(this.#until, sentAt + HELD_PART * leaseMs);
    const mine = reply.gaps[region];
    // Came back from a lapse: the floor counts again from the gap's end (a reply older than one
    // already heard may carry an older gap; the later end holds).
    if (mine !== undefined && mine.out >= 0) {
      const wait = this.#parts.waitAfterBackMs ?? 0;
      this.#from = Math.max(this.#from, mine.back * windowMs + wait + (1 - HELD_PART) * leaseMs);
    }
    this.#gaps = reply.gaps;
  }
}
