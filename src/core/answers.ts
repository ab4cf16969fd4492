// What a limiter answers a call: from the deny cache, the store's result, or the failure policy; reported, then enforced.
import { performance } from 'node:perf_hooks';
import { storedVariant } from '../algorithms/variants.js';
import { withFields } from '../copy.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import type {
  DecisionCounter,
  DecisionObserver,
  DecisionSource,
  MetricsRecorder,
  WaitEvent,
} from '../hooks.js';
import { entryOf } from '../operations.js';
import type { ResolvedLimiterOptions } from '../options.js';
import type { Decision, Store, StoreFailure, StoreResult } from '../types.js';
import type { Call } from './call.js';
import { DenyCache } from './deny-cache.js';
import { Fallback } from './fallback.js';
import { Health } from './health.js';
import { Reporting } from './reporting.js';
import { decisionOf } from './result.js';

/** Wraps what a store threw: a SluiceError as it is, anything else as ERR_SLUICE_STORE with it as `cause`. */
export function storeError(kind: string, error: unknown): SluiceError {
  if (error instanceof SluiceError) return error;
  const message = error instanceof Error ? error.message || error.name : String(error);
  return new SluiceError(ERROR_CODES.STORE, `The ${kind} store failed: ${message}`, { cause: error });
}

/**
 * A store that decides in process, at once (the memory store), perhaps in an object it reuses for a
 * caller that copies the result at once (MemoryStore.decideReused).
 */
export type InProcess = Required<Pick<Store, 'decideNow'>> & { decideReused?(request: Call): StoreResult };

/**
 * A call the store decided under a limit stored for its identifier runs under that limit's variant
 * of the policy from here on: its decision reports that `limit`, its headers that window, and what
 * it took is given back at the same rate.
 */
export function underStoredLimit(call: Call, result: StoreResult): void {
  const stored = result.stored;
  if (stored !== undefined && stored > 0) call.policy = storedVariant(call.policy, stored) ?? call.policy;
}

/**
 * The parts of a limiter that turn what happened to a call into its answer: the deny cache, the
 * store's health and failure policy (with the fallback store), reporting to hooks and recorders, and
 * shadow mode. Owned by the limiter's Pipeline, which asks each phase in turn.
 */
export class Answers {
  readonly #store: Store;
  readonly #enforce: boolean;
  readonly #timeoutMs: number;
  readonly #fallback = new Fallback();
  readonly #health: Health;
  readonly #denyCache: DenyCache | undefined;
  readonly #reporting: Reporting;
  /** Whether anyone listens to decisions (Reporting.observed), kept here as it changes. */
  #observed: boolean;
  /** Whether the listeners only count (Reporting.countsOnly), kept here as it changes. */
  #countsOnly: boolean;
  /** Whether some shard is failing (Health.down), kept here as it changes. */
  #down = false;
  /** Who watches every decision (see observe); undefined for none, the usual case. */
  #observers: DecisionObserver[] | undefined;
  /**
   * The one counter a decision of the fast path is reported to, when it is all there is: no
   * observer, no onDecision hook, one recorder, which counts (Reporting.only). A field, not a
   * getter: `Pipeline.call`'s fast path reads it on every decision and calls it directly.
   */
  counter: DecisionCounter | undefined;

  constructor(options: ResolvedLimiterOptions) {
    this.#store = options.store;
    this.#enforce = options.enforce;
    this.#timeoutMs = options.timeoutMs;
    this.#reporting = new Reporting(options);
    this.#observed = this.#reporting.observed;
    this.#countsOnly = this.#reporting.countsOnly;
    this.#health = new Health(options.onStoreError, this.#fallback, (up, shard) => {
      this.#down = this.#health.down;
      this.#reporting.health(up, shard);
    });
    const entries = options.denyCacheMaxEntries;
    this.#denyCache = entries > 0 ? new DenyCache(entries) : undefined;
  }

  /** Whether calls look at the deny cache first. */
  get caching(): boolean {
    return this.#denyCache !== undefined;
  }

  /**
   * Whether a store's result is the whole answer: no deny cache, no one to report to but counters
   * (metrics recorders), enforcing, and every shard healthy (most limiters, most of the time). See
   * `Pipeline.call`'s fast path, which reports through `plainDecided`.
   */
  get plain(): boolean {
    return (
      this.#denyCache === undefined && this.#enforce && !this.#down && (!this.#observed || this.#countsOnly)
    );
  }

  /** Counts the limiter's decisions in a recorder too, from now on (once per recorder). */
  attach(recorder: MetricsRecorder): void {
    this.#reporting.attach(recorder);
    this.#observed = true;
    this.#countsOnly = this.#reporting.countsOnly;
    this.counter = this.#observers === undefined ? this.#reporting.only : undefined;
  }

  /** Whether the fast path times this decision's store (one in 16 while someone counts; see `asking`). */
  timesThisOne(): boolean {
    return this.#observed && this.#reporting.timesThisOne();
  }

  /** Reports a decision of the fast path (see `plain`): to the observers, then the counters. */
  plainDecided(call: Call, decision: Decision, storeMs: number): void {
    if (this.#observers !== undefined) this.observed(call, decision, 'store');
    if (this.#observed) this.#reporting.decided(call, decision, 'store', storeMs);
  }

  /** Reports a decision of the fast path: to its sole counter (see `counter`), or as `plainDecided` does. */
  counted(counter: DecisionCounter | undefined, call: Call, decision: Decision, storeMs: number): void {
    if (counter === undefined) {
      this.plainDecided(call, decision, storeMs);
      return;
    }
    try {
      counter.count(decision, call, 'store', storeMs);
    } catch (error) {
      this.#reporting.counterFailed(error);
    }
  }

  /**
   * Calls `observer` with every decision from now on, on every path: unlike a recorder, it leaves
   * `plain` (the fast path) as it was.
   */
  observe(observer: DecisionObserver): void {
    this.#observers = [...(this.#observers ?? []), observer];
    this.counter = undefined;
  }

  /** Tells the observers of a decision (see observe). */
  observed(call: Call, decision: Decision, source: DecisionSource): void {
    const observers = this.#observers;
    if (observers !== undefined) for (const observer of observers) observer(decision, call, source);
  }

  /** Notes when the store is asked, for `storeMs`: one decision in 16 is timed, NaN for the others. */
  asking(call: Call): void {
    call.outagesSeen = this.#health.begun;
    // Reading the clock twice costs about what an in-process decision does.
    if (this.#observed) call.askedAt = this.#reporting.timesThisOne() ? performance.now() : Number.NaN;
  }

  /**
   * Whether the call goes to the store (see `admit`), noting when it was asked (see `asking`). A
   * call that no failure policy may answer (a charge: OperationEntry.onStoreFailure) always goes.
   */
  ask(call: Call): boolean {
    call.outagesSeen = this.#health.begun;
    if (this.#down && entryOf(call.operation, call.policy).onStoreFailure === 'policy' && !this.admit(call))
      return false;
    if (this.#observed) call.askedAt = this.#reporting.timesThisOne() ? performance.now() : Number.NaN;
    return true;
  }

  /**
   * The deny cache's phase, as the call's operation uses it (OperationEntry.denyCache): a call
   * remembered as denied is answered here (`reason: 'cached'`); one that gives back forgets.
   */
  cached(call: Call): Decision | undefined {
    const cache = this.#denyCache;
    if (cache === undefined) return undefined;
    call.startedAt = call.now ?? performance.now();
    const entry = entryOf(call.operation, call.policy);
    const use = entry.denyCache;
    if (use === 'forget') {
      cache.forget(call.identifier, call.tag);
    } else if (use === 'lookup') {
      const limit = call.policy.limit;
      const cost = entry.denyCost === undefined ? call.cost : entry.denyCost(call.cost);
      const hit = cache.lookup(call.identifier, call.tag, cost, limit, call.startedAt);
      if (hit !== undefined) {
        return this.#deliver(call, { allowed: false, limit, ...hit, reason: 'cached' }, 'cache', 0);
      }
    }
    call.epoch = cache.epoch;
    return undefined;
  }

  /**
   * Whether the call may go to the store (see Health.admit); false when the failure policy is to
   * answer without asking. Shards are looked up only during an outage.
   */
  admit(call: Call): boolean {
    call.outagesSeen = this.#health.begun;
    if (!this.#down) return true;
    call.shard = this.#store.shardOf?.(call);
    const admitted = this.#health.admit(call.shard);
    call.probe = admitted === 'probe';
    return admitted !== 'skip';
  }

  /** A call admitted as its shard's probe was not sent after all: the next call may probe. */
  unadmit(call: Call): void {
    if (call.probe) this.#health.release(call.shard);
  }

  /** The decision the store's result makes, reported and enforced. */
  decision(call: Call, result: StoreResult): Decision {
    if (this.#down) this.#health.answered(call.shard ?? this.#store.shardOf?.(call), call.outagesSeen);
    if (result.stored !== undefined) underStoredLimit(call, result);
    const decision = decisionOf(result, call);
    const observed = this.#observed;
    // Most limiters remember no denials, report to no one and enforce: the decision is the answer.
    if (this.#denyCache === undefined && !observed && this.#enforce) {
      if (this.#observers !== undefined) this.observed(call, decision, 'store');
      return decision;
    }
    // A stored denial is not remembered: undeny() must reach every process at its next decision.
    if (this.#denyCache !== undefined && !result.allowed && result.stored !== -1) {
      const entry = entryOf(call.operation, call.policy);
      if (entry.denyCache === 'lookup') {
        const { identifier, tag, startedAt, epoch } = call;
        const cost = entry.denyCost === undefined ? call.cost : entry.denyCost(call.cost);
        this.#denyCache.remember(identifier, tag, cost, decision.limit, result, startedAt, epoch);
      }
    }
    // NaN for a call that was not timed (see Reporting.timesThisOne).
    const storeMs = observed && !Number.isNaN(call.askedAt) ? performance.now() - call.askedAt : Number.NaN;
    return this.#deliver(call, decision, 'store', observed ? storeMs : 0);
  }

  /**
   * A call the store did not answer: the failure policy's decision, or, for an operation whose
   * store failure rejects (OperationEntry.onStoreFailure), the error thrown.
   */
  unanswered(call: Call, failure: StoreFailure, error: unknown): Decision {
    if (entryOf(call.operation, call.policy).onStoreFailure === 'policy')
      return this.failure(call, failure, error);
    throw this.noted(call, failure, error);
  }

  /** Settles a call the store did not answer (see `unanswered`): resolves it, or rejects it. */
  settleUnanswered(call: Call, failure: StoreFailure, error: unknown): void {
    try {
      call.resolve(this.unanswered(call, failure, error));
    } catch (rejected) {
      call.reject(rejected as SluiceError);
    }
  }

  /** A store failed a call at once (it threw): the failure policy's answer, or the rejection (see `unanswered`). */
  unansweredNow(call: Call, error: unknown): Promise<Decision> {
    try {
      return Promise.resolve(this.unanswered(call, 'store-error', error));
    } catch (rejected) {
      return Promise.reject(rejected);
    }
  }

  /** The store failed or ran out of time: the failure policy's decision, reported to `onError`. */
  failure(call: Call, failure: StoreFailure, error: unknown): Decision {
    this.noted(call, failure, error);
    return this.#deliver(call, this.#health.decide(call, failure), failure, 0);
  }

  /** A request the middleware's `deny` list refused before this limiter was asked, for the recorders. */
  listDenied(): void {
    this.#reporting.listDenied();
  }

  /** A store failure noted (the shard's health, `onError`, the call's `error`); the error, wrapped. */
  noted(call: Call, failure: StoreFailure, error: unknown): SluiceError {
    const wrapped = failure === 'timeout' ? this.timeoutError() : storeError(this.#store.kind, error);
    call.shard ??= this.#store.shardOf?.(call);
    this.#health.failed(call.shard, failure, wrapped, call.probe);
    // The error is onError's first argument; the decision's hooks find it in their context.
    const reporting = this.#reporting;
    if (reporting.hearsFailures) reporting.failed(wrapped, reporting.context(call, failure, 0));
    call.error = wrapped;
    return wrapped;
  }

  /** The call's shard is failing and another call probes it: the failure policy answers without asking. */
  skipped(call: Call): Decision {
    const outage = this.#health.outage(call.shard);
    call.error = outage.error;
    return this.#deliver(call, this.#health.decide(call, outage.reason), 'skipped', 0);
  }

  /**
   * Gives back, in the fallback store, what a fallback decision took (`back` is the call that gives
   * back), or renews a lease it holds: the fallback store's decision, or undefined before any.
   */
  giveBackFallback(back: Call): Decision | undefined {
    return this.#fallback.giveBack(back);
  }

  /** A wait for a slot began or ended, or an upstream paused an identifier (see Reporting.waited). */
  waited(event: WaitEvent): void {
    if (this.#observed) this.#reporting.waited(event);
  }

  /** Forgets what the deny cache remembers of an identifier (its stored limit or denial changed). */
  forgetDenial(identifier: string, tag: string | undefined): void {
    this.#denyCache?.forget(identifier, tag);
  }

  /** Forgets an identifier in the deny cache and the fallback store (`reset`). */
  forget(name: string, identifier: string, tag: string | undefined): void {
    this.#denyCache?.forget(identifier, tag);
    this.#fallback.forget(name, identifier, tag);
  }

  /** A reset the store failed or did not answer in time: `onError` hears of it; the error, wrapped. */
  resetFailed(thrown: unknown, name: string, identifier: string): SluiceError {
    // A timeout's error is a SluiceError already (ERR_SLUICE_TIMEOUT): kept as it is.
    const error = storeError(this.#store.kind, thrown);
    const source = error.code === ERROR_CODES.TIMEOUT ? 'timeout' : 'store-error';
    const context = { name, identifier, operation: 'reset', cost: 0, source, storeMs: 0 } as const;
    this.#reporting.failed(error, { ...context, enforced: this.#enforce });
    return error;
  }

  timeoutError(): SluiceError {
    return new SluiceError(
      ERROR_CODES.TIMEOUT,
      `The ${this.#store.kind} store did not answer within \`timeoutMs\` (${this.#timeoutMs} ms).`,
    );
  }

  /** Reports the real decision to the hooks, and gives the caller the enforced one (shadow mode). */
  #deliver(call: Call, given: Decision, source: DecisionSource, storeMs: number): Decision {
    const entry = entryOf(call.operation, call.policy);
    // A decision the store did not make carries what the operation's answer always does.
    const decision =
      source === 'store' || entry.unanswered === undefined ? given : entry.unanswered(given, call.cost);
    if (this.#observers !== undefined) this.observed(call, decision, source);
    if (this.#observed) this.#reporting.decided(call, decision, source, storeMs);
    if (this.#enforce) return decision;
    const shadowed: Decision = {
      allowed: true,
      limit: decision.limit,
      remaining: decision.remaining,
      resetMs: decision.resetMs,
      retryAfterMs: 0,
      wouldAllow: decision.allowed,
    };
    // A lease's acquisition, release and renewal give the caller what they hold (their entries' shadow).
    if (entry.shadow !== undefined) return entry.shadow(decision, shadowed);
    return decision.reason === undefined ? shadowed : withFields(shadowed, { reason: decision.reason });
  }
}
