// Counts decisions per limiter (see LimiterTally), which every exporter and the dashboard read.
import type { BudgetView } from '../budget/view.js';
import type {
  CountedCall,
  DecisionCounter,
  DecisionSource,
  DenyList,
  HookContext,
  MetricsRecorder,
  WaitEvent,
} from '../hooks.js';
import { OPERATIONS } from '../operations.js';
import { type Decision, isStoreFailure, type Policy, type Store } from '../types.js';
import { type MetricOutcome, type SkipReason, STORE_SECONDS_BUCKETS } from './definitions.js';
import { LeaseTally } from './leases.js';
import { LimiterTally } from './limiter-tally.js';
import { type HotOptions, resolveMetricsOptions } from './options.js';
import type { HeavyHitter } from './space-saving.js';
import type { WaitHistogram, WaitTally } from './waits.js';

export { LimiterTally };

/** What a limiter's counters hold, as {@link DecisionMetrics.snapshot} reports them. */
export interface LimiterMetrics {
  readonly limiter: string;
  /** The policy's description (`tokenBucket(capacity=100,refillPerSecond=10)`), once registered. */
  readonly policy: string | undefined;
  /** The store's kind (`redis`, `memory`), once registered. */
  readonly store: string | undefined;
  /** `false` in shadow mode. */
  readonly enforced: boolean;
  /** Decisions by outcome: `limit` (a lease's acquisition too), `takeUpTo`, the slots of wait() (OperationEntry.counts). */
  readonly decisions: Readonly<Record<MetricOutcome, number>>;
  /** Units those calls asked for (`takeUpTo`: the units it took). */
  readonly units: number;
  /** Allowed calls that left at most 20% of the limit. */
  readonly nearLimit: number;
  /** Denials the deny cache answered. */
  readonly denyCacheHits: number;
  /** Requests refused by a deny list: the limiter's stored denials, the middleware's `deny` option. */
  readonly listDenials: Readonly<Record<DenyList, number>>;
  /** `charge` calls (settles that charged among them), the units they took, and the units `maxDebt` cut off. */
  readonly charges: { readonly count: number; readonly units: number; readonly cutOff: number };
  /** Calls the store did not decide, by reason. */
  readonly storeSkipped: Readonly<Record<SkipReason, number>>;
  /** The store's decision time: cumulative counts per upper bound in seconds (the last is `Infinity`). */
  readonly storeDecisionSeconds: {
    readonly buckets: ReadonlyArray<{ readonly le: number; readonly count: number }>;
    readonly sum: number;
    readonly count: number;
  };
  /** `false` while the failure policy decides (some shard is down). */
  readonly storeUp: boolean;
  /** The shards that are down; `''` stands for a store of one shard. */
  readonly downShards: readonly string[];
  /** When the current outage started (ms since the epoch), or `undefined` while the store is up. */
  readonly downSinceMs: number | undefined;
  /** The most-denied identifiers over the last one to two `hotWindowMs`, most first. */
  readonly topDenied: readonly HeavyHitter[];
  /**
   * A concurrency limiter's slots: in use now as far as this process saw (each identifier as of
   * its last decision, until its leases would lapse), and those of leases that lapsed unreleased.
   * Acquisitions refused are its `decisions.denied`.
   */
  readonly leases?: {
    readonly slotsInUse: number;
    readonly expiredUnreleased: number;
    /** How long `throttle()` calls waited for one of its leases (those that got one), after their rate slot. */
    readonly waitSeconds: WaitHistogram;
  };
  /** Calls waiting for a slot (wait(), throttle()): now, how long those that went waited, and pauses from upstreams. */
  readonly waits: {
    readonly waiting: number;
    readonly waitSeconds: ReturnType<WaitTally['histogram']>;
    readonly upstreamPauses: number;
  };
  /** What the limiter's region holds and asks, when it shares a global budget. */
  readonly budget?: BudgetView;
}

/** Options every recorder takes. */
export interface DecisionMetricsOptions {
  /**
   * How many of the most-denied identifiers to keep per limiter (a fixed-size sketch: memory does
   * not grow with the number of identifiers). 0 keeps none. Identifiers never become metric labels.
   * @default 20
   */
  readonly hotIdentifiers?: number;
  /**
   * How long a window of the most-denied list lasts: the list covers the last one to two windows,
   * so that it names who is denied now rather than since the process started. 0 counts since the start.
   * @default 300000 (five minutes)
   */
  readonly hotWindowMs?: number;
}

/** Counts a decision's outcome: allowed (and near its limit), or denied, and by whom. */
function countOutcome(tally: LimiterTally, decision: Decision, call: CountedCall, enforced: boolean): void {
  if (decision.allowed) {
    tally.allowed++;
    // At least 80% of the limit used: remaining <= limit / 5, without a division.
    if (decision.remaining * 5 <= decision.limit) tally.nearLimit++;
    return;
  }
  if (enforced) tally.denied++;
  else tally.shadowDenied++;
  if (decision.reason === 'denied') tally.storeListDenials++;
  // A failure policy that denies everyone says nothing about who is hot.
  if (tally.hot !== undefined && !isStoreFailure(decision.reason)) tally.hot.add(call.identifier);
}

/**
 * Counts each limiter's decisions in process: pass it as `createLimiter({ metrics })`. Read the
 * counts with `snapshot()` and the most-denied identifiers with `topDenied()`. The Prometheus and
 * OpenTelemetry recorders are this with an exporter; use this one alone for a dashboard of your own.
 *
 * Decisions are the calls that ask for units (`limit`, `takeUpTo`, the slots of `wait()`); charges
 * are counted apart (with what `maxDebt` cut off); `peek` and `refund` count in the store time
 * histogram only. Each operation declares which it is (see OperationEntry.counts).
 *
 * @example
 * const metrics = decisionMetrics();
 * const limiter = createLimiter({ store, policy, name: 'api', metrics });
 * metrics.topDenied('api'); // [{ identifier: '203.0.113.9', count: 1200, error: 0 }]
 */
export class DecisionMetrics implements MetricsRecorder {
  readonly #tallies = new Map<string, LimiterTally>();
  readonly #hotCapacity: number;
  // Most processes have few limiters and a burst of calls comes from one: a string comparison
  // (identical strings compare by pointer) saves the map lookup.
  #lastName: string | undefined;
  #last: LimiterTally | undefined;

  constructor(hot: HotOptions) {
    this.#hotCapacity = hot.hotIdentifiers;
    if (hot.hotIdentifiers > 0 && hot.hotWindowMs > 0) {
      // One timer per recorder, not per limiter or identifier; it does not keep the process alive.
      const rotation = setInterval(() => {
        for (const tally of this.#tallies.values()) tally.hot?.rotate();
      }, hot.hotWindowMs);
      rotation.unref();
    }
  }

  /**
   * Makes the limiter's counters (all at 0) and remembers its policy, store and mode; returns what
   * counts its decisions (the tally is found once, here, not per decision).
   */
  register(limiter: {
    readonly name: string;
    readonly policy: Policy;
    readonly store: Store;
    readonly enforced: boolean;
  }): DecisionCounter {
    const tally = this.tally(limiter.name);
    tally.policy = limiter.policy.description;
    tally.store = limiter.store.kind;
    tally.enforced = limiter.enforced;
    if (limiter.policy.leaseMs !== undefined) tally.leases ??= new LeaseTally();
    const enforced = limiter.enforced;
    // An exporter that sees each store time (OpenTelemetry's histogram) keeps the general path.
    const untimedAlone = this.observe === DecisionMetrics.prototype.observe;
    return {
      count: (decision, call, source, storeMs) => {
        // The usual decision of an in-process limiter: a `limit` the store decided, untimed (15 in
        // 16, see LimiterTally.observe), no slot to follow. Counted here in a few additions.
        if (
          untimedAlone &&
          source === 'store' &&
          call.operation === 'limit' &&
          Number.isNaN(storeMs) &&
          tally.leases === undefined
        ) {
          tally.untimed();
          tally.units += call.cost;
          countOutcome(tally, decision, call, enforced);
          return;
        }
        this.count(tally, decision, call, source, storeMs, enforced);
      },
    };
  }

  /** Counts one decision (the verdict before shadow mode, as limiters report it). */
  record(decision: Decision, context: HookContext): void {
    const name = context.name;
    const tally = name === this.#lastName ? (this.#last as LimiterTally) : this.tally(name);
    // `reset` reaches onError only, never a recorder.
    const call = context as CountedCall;
    this.count(tally, decision, call, context.source, context.storeMs, context.enforced);
  }

  /** Counts one decision in a limiter's tally. */
  protected count(
    tally: LimiterTally,
    decision: Decision,
    call: CountedCall,
    source: DecisionSource,
    storeMs: number,
    enforced: boolean,
  ): void {
    if (source === 'store') this.observe(tally, storeMs);
    // Slots are counted from every decision on them: acquisitions, releases, renewals, looks.
    if (tally.leases !== undefined && (source === 'store' || decision.reason === 'fallback')) {
      tally.leases.observe(call.identifier, decision);
    }
    // What a call counts is its operation's to say (OperationEntry.counts): decisions by outcome
    // (`limit`, a lease's acquisition, the slots of wait(), takeUpTo), charges, or neither.
    const counts = OPERATIONS[call.operation].counts;
    if (!counts.decisions) {
      // Off the path of `limit`: a charge's counts cost the calls that charge.
      if (counts.charges) {
        const cutOff = decision.cutOff ?? 0;
        tally.charges++;
        tally.chargedUnits += call.cost - cutOff;
        tally.cutOff += cutOff;
      }
      return;
    }
    if (counts.units === 'cost') tally.units += call.cost;
    else if (counts.units === 'granted') tally.units += (decision as { granted?: number }).granted ?? 0;
    countOutcome(tally, decision, call, enforced);
    if (source === 'store') return;
    if (source === 'cache') tally.cacheHits++;
    else if (decision.reason === 'fallback') tally.fallback++;
    else if (source === 'timeout') tally.timeout++;
    else if (source === 'store-error') tally.storeError++;
    else tally.skipped++;
  }

  /** Counts a request the middleware's `deny` option refused before the limiter was asked. */
  listDenied(name: string, list: DenyList): void {
    const tally = this.tally(name);
    if (list === 'middleware') tally.middlewareListDenials++;
    else tally.storeListDenials++;
  }

  /** The store went down (`up` false) or came back for a limiter, on one shard or all. */
  health(name: string, up: boolean, shard: string | undefined): void {
    const tally = this.tally(name);
    const down = tally.downShards;
    if (up) {
      // A store of one shard, or the whole store, is back.
      if (shard === undefined) down.clear();
      else down.delete(shard);
    } else down.add(shard ?? '');
    if (down.size === 0) tally.downSince = undefined;
    else tally.downSince ??= Date.now();
  }

  /** A call waiting for a slot began or ended, or an upstream paused an identifier. */
  waited(name: string, event: WaitEvent): void {
    this.tally(name).waits.record(event);
  }

  /** A limiter with a global budget: its view is read whenever the counts are. */
  budget(name: string, view: () => BudgetView): void {
    this.tally(name).budget = view;
  }

  /** The most-denied identifiers of a limiter over the last one to two `hotWindowMs`, most first (none when it has not registered or denied). */
  topDenied(limiter: string, limit?: number): HeavyHitter[] {
    return this.#tallies.get(limiter)?.hot?.top(limit) ?? [];
  }

  /** Every limiter's counts, in the order they registered. */
  snapshot(): LimiterMetrics[] {
    return [...this.#tallies.values()].map(describe);
  }

  /** The limiters' tallies, for exporters. */
  protected get tallies(): Iterable<LimiterTally> {
    return this.#tallies.values();
  }

  /** Records a store decision time; exporters that need each observation extend it. */
  /** Counts a store decision's time; returns the time counted (an untimed one counts as the last timed). */
  protected observe(tally: LimiterTally, storeMs: number): number {
    return tally.observe(storeMs);
  }

  protected tally(name: string): LimiterTally {
    let tally = this.#tallies.get(name);
    if (tally === undefined) {
      tally = new LimiterTally(name, this.#hotCapacity);
      this.#tallies.set(name, tally);
    }
    this.#lastName = name;
    this.#last = tally;
    return tally;
  }
}

/** Cumulative histogram buckets in seconds, as Prometheus and the snapshot report them. */
export function cumulativeBuckets(tally: LimiterTally): Array<{ le: number; count: number }> {
  let count = 0;
  const { buckets } = tally.histogram();
  return [...STORE_SECONDS_BUCKETS, Number.POSITIVE_INFINITY].map((le, i) => {
    count += buckets[i] as number;
    return { le, count };
  });
}

function describe(tally: LimiterTally): LimiterMetrics {
  const buckets = cumulativeBuckets(tally);
  return {
    limiter: tally.name,
    policy: tally.policy,
    store: tally.store,
    enforced: tally.enforced,
    decisions: { allowed: tally.allowed, denied: tally.denied, shadow_denied: tally.shadowDenied },
    units: tally.units,
    nearLimit: tally.nearLimit,
    denyCacheHits: tally.cacheHits,
    listDenials: { store: tally.storeListDenials, middleware: tally.middlewareListDenials },
    charges: { count: tally.charges, units: tally.chargedUnits, cutOff: tally.cutOff },
    storeSkipped: {
      timeout: tally.timeout,
      store_error: tally.storeError,
      skipped: tally.skipped,
      fallback: tally.fallback,
    },
    storeDecisionSeconds: {
      buckets,
      sum: tally.histogram().sumMs / 1000,
      count: buckets[buckets.length - 1]?.count ?? 0,
    },
    storeUp: tally.downShards.size === 0,
    downShards: [...tally.downShards],
    downSinceMs: tally.downSince,
    topDenied: tally.hot?.top() ?? [],
    ...(tally.leases === undefined
      ? {}
      : {
          leases: {
            slotsInUse: tally.leases.slotsInUse(),
            expiredUnreleased: tally.leases.expired,
            waitSeconds: tally.waits.leaseHistogram(),
          },
        }),
    waits: {
      waiting: tally.waits.waiting,
      waitSeconds: tally.waits.histogram(),
      upstreamPauses: tally.waits.pauses,
    },
    ...(tally.budget === undefined ? {} : { budget: tally.readBudget() as BudgetView }),
  };
}

/**
 * A recorder that counts in process only, read with `snapshot()` and `topDenied()`.
 *
 * @example
 * const metrics = decisionMetrics({ hotIdentifiers: 10 });
 * const limiter = createLimiter({ store, policy, name: 'login', metrics });
 * setInterval(() => console.log(metrics.topDenied('login', 3)), 60_000).unref();
 */
export function decisionMetrics(options?: DecisionMetricsOptions): DecisionMetrics {
  return new DecisionMetrics(resolveMetricsOptions('decisionMetrics', options, [], false).hot);
}
