// One limiter's counts in plain numbers: what a decision adds to, and what exporters and snapshots read.
import type { BudgetView } from '../budget/view.js';
import { STORE_MS_BUCKETS } from './definitions.js';
import type { LeaseTally } from './leases.js';
import { RecentHeavyHitters } from './space-saving.js';
import { WaitTally } from './waits.js';

/** One limiter's counts. Plain fields: a decision costs a few additions, no lookup by label. */
export class LimiterTally {
  readonly name: string;
  /** The policy's description, the store's kind and shadow mode, once the limiter registered. */
  policy: string | undefined;
  store: string | undefined;
  enforced = true;
  allowed = 0;
  denied = 0;
  shadowDenied = 0;
  units = 0;
  nearLimit = 0;
  cacheHits = 0;
  timeout = 0;
  storeError = 0;
  skipped = 0;
  fallback = 0;
  /** Requests refused by the limiter's stored denials, and by the middleware's `deny` option. */
  storeListDenials = 0;
  middlewareListDenials = 0;
  /** `charge` calls, the units they took, and the units maxDebt cut off. */
  charges = 0;
  chargedUnits = 0;
  cutOff = 0;
  /** Store decisions per histogram bucket (not cumulative); the last one is above 1 s. See histogram(). */
  readonly #buckets = new Float64Array(STORE_MS_BUCKETS.length + 1);
  #storeMsSum = 0;
  /** Untimed decisions since the last timed one, not yet in #buckets (see observe). */
  #untimed = 0;
  /** Shards whose failures send this limiter's decisions to its failure policy ('' for a single shard). */
  readonly downShards = new Set<string>();
  /** When the first shard of the current outage went down (ms since the epoch). */
  downSince: number | undefined;
  readonly hot: RecentHeavyHitters | undefined;
  /** A concurrency limiter's slots in use and lapsed leases; undefined for the others. */
  leases: LeaseTally | undefined;
  /** Calls waiting for a slot: waiting now, how long they waited, pauses from upstreams. */
  readonly waits = new WaitTally();
  /** What the limiter's region holds and asks, when it shares a global budget (read when exported). */
  budget: (() => BudgetView) | undefined;
  #budgetView: BudgetView | undefined;
  #budgetReadAt = 0;

  constructor(name: string, hotCapacity: number) {
    this.name = name;
    this.hot = hotCapacity > 0 ? new RecentHeavyHitters(hotCapacity) : undefined;
  }

  /** The bucket and time of the last timed decision, which stand for the untimed ones. */
  #lastBucket = 0;
  #lastMs = 0;

  /**
   * Counts one store decision's time. An in-process store times one decision in 16 (`NaN` for the
   * others): those count as the last timed one did, so the count stays exact.
   */
  observe(storeMs: number): number {
    // Untimed ones are counted, and put in the last timed one's bucket when it changes or is read.
    if (Number.isNaN(storeMs)) {
      this.#untimed++;
      return this.#lastMs;
    }
    this.#settle();
    const bounds = STORE_MS_BUCKETS;
    let i = 0;
    while (i < bounds.length && storeMs > (bounds[i] as number)) i++;
    this.#lastBucket = i;
    this.#lastMs = storeMs;
    this.#buckets[i] = (this.#buckets[i] as number) + 1;
    this.#storeMsSum += storeMs;
    return storeMs;
  }

  /** Counts an untimed store decision, as `observe(NaN)` does. */
  untimed(): void {
    this.#untimed++;
  }

  #settle(): void {
    const untimed = this.#untimed;
    if (untimed === 0) return;
    const i = this.#lastBucket;
    this.#buckets[i] = (this.#buckets[i] as number) + untimed;
    this.#storeMsSum += untimed * this.#lastMs;
    this.#untimed = 0;
  }

  /** The store time histogram: decisions per bucket (not cumulative; the last is above 1 s) and their sum in ms. */
  histogram(): { readonly buckets: Float64Array; readonly sumMs: number } {
    this.#settle();
    return { buckets: this.#buckets, sumMs: this.#storeMsSum };
  }

  /**
   * The budget's view, read at most every quarter second: a view sums over every identifier the
   * process tracks, and one scrape reads it for each instrument.
   */
  readBudget(): BudgetView | undefined {
    if (this.budget === undefined) return undefined;
    const now = Date.now();
    if (this.#budgetView === undefined || now - this.#budgetReadAt >= 250) {
      this.#budgetView = this.budget();
      this.#budgetReadAt = now;
    }
    return this.#budgetView;
  }

  /** Empties the store time histogram. */
  clearHistogram(): void {
    this.#buckets.fill(0);
    this.#storeMsSum = 0;
    this.#untimed = 0;
  }
}
