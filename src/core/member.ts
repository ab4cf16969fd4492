// One limiter's part in the pipeline: its calls made and checked, the deny cache, store health, the
// failure policy, shadow mode and hooks. Each phase is one short method; pipeline.ts orders them.
import { performance } from 'node:perf_hooks';
import { ERROR_CODES, SluiceError } from '../errors.js';
import {
  callHook,
  type DecisionCounter,
  type DecisionSource,
  type HookContext,
  type MetricsRecorder,
  reportHookFailure,
} from '../hooks.js';
import type { ResolvedLimiterOptions } from '../options.js';
import type { Decision, Operation, Policy, Store, StoreFailure, StoreResult } from '../types.js';
import { Call, checkCost, checkIdentifier, checkTag, policyFor, readClock } from './call.js';
import { Deadlines } from './deadlines.js';
import { DenyCache } from './deny-cache.js';
import { Health } from './health.js';

/** Wraps what a store threw: a SluiceError as it is, anything else as ERR_SLUICE_STORE with it as `cause`. */
export function storeError(kind: string, error: unknown): SluiceError {
  if (error instanceof SluiceError) return error;
  const message = error instanceof Error ? error.message || error.name : String(error);
  return new SluiceError(ERROR_CODES.STORE, `The ${kind} store failed: ${message}`, { cause: error });
}

export class Member {
  readonly name: string;
  readonly policy: Policy;
  readonly store: Store;
  readonly clock: (() => number) | undefined;
  readonly enforce: boolean;
  readonly deadlines: Deadlines;
  readonly health: Health;
  readonly denyCache: DenyCache | undefined;
  /** Whether the store decides in process, synchronously (`store.decideNow`: the memory store). */
  readonly inProcess: boolean;
  readonly #onDecision: ResolvedLimiterOptions['onDecision'];
  readonly #onError: ResolvedLimiterOptions['onError'];
  /** Where decisions are counted: the limiter's `metrics`, and those attached by all() and the like. */
  // Each with the counter its `register` returned, called instead of `record` when there is one.
  readonly #recorders: Array<{
    readonly recorder: MetricsRecorder;
    readonly counter: DecisionCounter | undefined;
  }> = [];
  /** Whether anyone listens to decisions: only then are contexts built and store times taken. */
  observed: boolean;
  #untimed = 0;
  /** The call the next transient in-process decision reuses (see transientCall). */
  #spare: Call | undefined;
  /** A context reused for the recorder alone (it keeps nothing of it once `record` returns). */
  readonly #scratch: { -readonly [K in keyof HookContext]: HookContext[K] | undefined };

  constructor(options: ResolvedLimiterOptions) {
    const { store, policy, name, metrics } = options;
    this.name = name;
    this.policy = policy;
    this.store = store;
    this.clock = options.clock;
    this.enforce = options.enforce;
    this.deadlines = new Deadlines(options.timeoutMs);
    store.attached?.({ name, timeoutMs: options.timeoutMs });
    this.health = new Health(options.onStoreError, (up, shard) => {
      for (const { recorder } of this.#recorders) recorder.health(name, up, shard);
    });
    this.denyCache = options.denyCacheMaxEntries > 0 ? new DenyCache(options.denyCacheMaxEntries) : undefined;
    this.inProcess = typeof store.decideNow === 'function';
    if (this.inProcess) this.#spare = new Call(this, policy, 'peek', '', 1, undefined, undefined);
    this.#onDecision = options.onDecision;
    this.#onError = options.onError;
    this.observed = options.onDecision !== undefined;
    this.#scratch = {
      name,
      identifier: '',
      operation: 'limit',
      cost: 0,
      source: 'store',
      storeMs: 0,
      enforced: options.enforce,
      error: undefined,
      shard: undefined,
    };
    if (metrics !== undefined) this.attach(metrics);
  }

  /** Counts this limiter's decisions in a recorder too, from now on (once per recorder). */
  attach(recorder: MetricsRecorder): void {
    if (this.#recorders.some((attached) => attached.recorder === recorder)) return;
    const counter = recorder.register({
      name: this.name,
      policy: this.policy,
      store: this.store,
      enforced: this.enforce,
    });
    const counts = typeof counter === 'object' && counter !== null && typeof counter.count === 'function';
    this.#recorders.push({ recorder, counter: counts ? counter : undefined });
    this.observed = true;
  }

  /**
   * Checks a call's parts: the policy it runs under (the limiter's, or its variant for `limit`), or
   * the error. Nothing is asked of the store either way.
   */
  check(
    identifier: unknown,
    cost: unknown,
    costOption: string,
    tag: unknown,
    limit: unknown,
  ): Policy | SluiceError {
    let policy = this.policy;
    if (limit !== undefined) {
      const variant = policyFor(policy, limit);
      if (variant instanceof SluiceError) return variant;
      policy = variant;
    }
    const invalid = checkIdentifier(identifier) ?? checkCost(costOption, cost, policy) ?? checkTag(tag);
    return invalid === undefined ? policy : invalid;
  }

  /** A checked call, or the error; reads the limiter's clock. */
  call(
    operation: Operation,
    identifier: string,
    cost: number,
    costOption: string,
    tag: string | undefined,
    limit: number | undefined,
  ): Call | SluiceError {
    const policy = this.check(identifier, cost, costOption, tag, limit);
    if (policy instanceof SluiceError) return policy;
    const now = this.time();
    if (now instanceof SluiceError) return now;
    return new Call(this, policy, operation, identifier, cost, tag, now);
  }

  /**
   * A call that nothing keeps once it is decided (the limiter's own methods): on a store that
   * decides in process, one object serves call after call, handed back by `release` (a hook that
   * calls the limiter meanwhile gets a new one).
   */
  transientCall(
    operation: Operation,
    identifier: string,
    cost: number,
    costOption: string,
    tag: string | undefined,
    limit: number | undefined,
  ): Call | SluiceError {
    const spare = this.#spare;
    if (spare === undefined || limit !== undefined || this.clock !== undefined) {
      return this.call(operation, identifier, cost, costOption, tag, limit);
    }
    // The common call, checked inline: the limiter's own policy and the store's clock.
    const policy = this.policy;
    const invalid = checkIdentifier(identifier) ?? checkCost(costOption, cost, policy) ?? checkTag(tag);
    if (invalid !== undefined) return invalid;
    this.#spare = undefined;
    return spare.renew(policy, operation, identifier, cost, tag, undefined);
  }

  /** Takes back a transient call decided in process. */
  release(call: Call): void {
    if (this.inProcess) this.#spare = call;
  }

  /** The limiter's time for a call: its clock's reading, `undefined` for the store's, or the clock's error. */
  time(): number | SluiceError | undefined {
    return readClock(this.clock);
  }

  /**
   * The deny cache's phase: a refund forgets the identifier; a check remembered as denied is
   * answered here (`reason: 'cached'`), and anything else notes when it started.
   */
  cached(call: Call): Decision | undefined {
    const cache = this.denyCache;
    if (cache === undefined) return undefined;
    call.startedAt = call.now ?? performance.now();
    if (call.operation === 'refund') {
      cache.forget(call.identifier, call.tag);
    } else {
      const hit = cache.lookup(call.identifier, call.tag, call.cost, call.policy.limit, call.startedAt);
      if (hit !== undefined) {
        const decision: Decision = { allowed: false, limit: call.policy.limit, ...hit, reason: 'cached' };
        return this.deliver(call, decision, 'cache', 0);
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
    if (!this.health.down) return true;
    call.shard = this.store.shardOf?.(call);
    const admitted = this.health.admit(call.shard);
    call.probe = admitted === 'probe';
    return admitted !== 'skip';
  }

  /** The store answered in time: the decision it made. */
  answered(call: Call, result: StoreResult): Decision {
    if (this.health.down) this.health.answered(call.shard ?? this.store.shardOf?.(call));
    const decision: Decision = {
      allowed: result.allowed,
      limit: call.policy.limit,
      remaining: result.remaining,
      resetMs: result.resetMs,
      retryAfterMs: result.retryAfterMs,
    };
    // Most limiters remember no denials, report to no one and enforce: the decision is the answer.
    if (this.denyCache === undefined && !this.observed && this.enforce) return decision;
    if (this.denyCache !== undefined && !result.allowed && call.operation !== 'refund') {
      this.denyCache.remember(
        call.identifier,
        call.tag,
        call.cost,
        call.policy.limit,
        result,
        call.startedAt,
        call.epoch,
      );
    }
    // NaN for an in-process call that was not timed (see timesThisOne).
    const storeMs =
      this.observed && !Number.isNaN(call.askedAt) ? performance.now() - call.askedAt : Number.NaN;
    return this.deliver(call, decision, 'store', this.observed ? storeMs : 0);
  }

  /** The store failed or ran out of time: the failure policy's decision, reported to `onError`. */
  failed(call: Call, failure: StoreFailure, error: unknown): Decision {
    const wrapped =
      failure === 'timeout'
        ? new SluiceError(
            ERROR_CODES.TIMEOUT,
            `The ${this.store.kind} store did not answer within \`timeoutMs\` (${this.deadlines.timeoutMs} ms).`,
          )
        : storeError(this.store.kind, error);
    call.shard ??= this.store.shardOf?.(call);
    this.health.failed(call.shard, failure, wrapped, call.probe);
    // The error is onError's first argument; the decision's hooks find it in their context.
    if (this.#onError !== undefined) {
      callHook('onError', this.#onError, wrapped, this.context(call, failure, 0));
    }
    call.error = wrapped;
    return this.deliver(call, this.health.decide(call, failure), failure, 0);
  }

  /** The call's shard is failing and another call probes it: the failure policy answers without asking. */
  skipped(call: Call): Decision {
    const outage = this.health.outage(call.shard);
    call.error = outage.error;
    return this.deliver(call, this.health.decide(call, outage.reason), 'skipped', 0);
  }

  /** Whether to time this decision: the first, then one in 16 (`storeMs` is NaN for the others). */
  timesThisOne(): boolean {
    return (this.#untimed++ & 15) === 0;
  }

  /** Reports the real decision to the hooks, and gives the caller the enforced one (shadow mode). */
  deliver(call: Call, decision: Decision, source: DecisionSource, storeMs: number): Decision {
    if (this.observed) {
      if (this.#onDecision !== undefined) {
        callHook('onDecision', this.#onDecision, decision, this.context(call, source, storeMs));
      }
      const recorders = this.#recorders;
      for (let i = 0; i < recorders.length; i++) {
        const { recorder, counter } = recorders[i] as (typeof recorders)[number];
        try {
          if (counter !== undefined) counter.count(decision, call, source, storeMs);
          else this.#record(recorder, decision, call, source, storeMs);
        } catch (error) {
          reportHookFailure('metrics', recorder, error);
        }
      }
    }
    if (this.enforce) return decision;
    const shadowed: Decision = {
      allowed: true,
      limit: decision.limit,
      remaining: decision.remaining,
      resetMs: decision.resetMs,
      retryAfterMs: 0,
      wouldAllow: decision.allowed,
    };
    return decision.reason === undefined ? shadowed : { ...shadowed, reason: decision.reason };
  }

  /** Hands the decision to a recorder without a counter of its own, in the reused context. */
  #record(
    recorder: MetricsRecorder,
    decision: Decision,
    call: Call,
    source: DecisionSource,
    storeMs: number,
  ): void {
    const context = this.#scratch;
    context.identifier = call.identifier;
    context.operation = call.operation;
    context.cost = call.cost;
    context.source = source;
    context.storeMs = storeMs;
    context.error = call.error;
    context.shard = call.shard;
    recorder.record(decision, context as HookContext);
  }

  /** What hooks are told of a call. */
  context(call: Call, source: DecisionSource, storeMs: number): HookContext {
    const context: {
      -readonly [K in keyof HookContext]: HookContext[K];
    } = {
      name: this.name,
      identifier: call.identifier,
      operation: call.operation,
      cost: call.cost,
      source,
      storeMs,
      enforced: this.enforce,
    };
    if (call.error !== undefined) context.error = call.error;
    if (call.shard !== undefined) context.shard = call.shard;
    return context;
  }

  /** Forgets an identifier everywhere this limiter keeps it; rejects with the store's error. */
  reset(identifier: string, tag: string | undefined): Promise<void> {
    const invalid = checkIdentifier(identifier) ?? checkTag(tag);
    if (invalid !== undefined) return Promise.reject(invalid);
    this.denyCache?.forget(identifier, tag);
    this.health.forget(this.name, identifier, tag);
    const store = this.store;
    return new Promise<void>((resolve, reject) => {
      const fail = (error: SluiceError): void => {
        if (this.#onError !== undefined) {
          const context: HookContext = {
            name: this.name,
            identifier,
            operation: 'reset',
            cost: 0,
            source: error.code === ERROR_CODES.TIMEOUT ? 'timeout' : 'store-error',
            storeMs: 0,
            enforced: this.enforce,
          };
          callHook('onError', this.#onError, error, context);
        }
        reject(error);
      };
      this.deadlines.race(
        () =>
          tag === undefined ? store.reset(this.name, identifier) : store.reset(this.name, identifier, tag),
        resolve,
        (error) => fail(storeError(store.kind, error)),
        () =>
          fail(
            new SluiceError(
              ERROR_CODES.TIMEOUT,
              `The ${store.kind} store did not answer within \`timeoutMs\` (${this.deadlines.timeoutMs} ms).`,
            ),
          ),
      );
    });
  }
}
