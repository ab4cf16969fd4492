import { ERROR_CODES, SluiceError } from '../errors.js';
import type { DecisionObserver, MetricsRecorder, WaitEvent } from '../hooks.js';
import { type CallParts, checkUnits, entryOf, OPERATIONS } from '../operations.js';
import type { ResolvedLimiterOptions } from '../options.js';
import type { Decision, Operation, Policy, Store, StoreFailure, StoreReply, StoreResult } from '../types.js';
import { Answers, storeError, underStoredLimit } from './answers.js';
import { Call } from './call.js';
import { checkIdentifier, checkTag, policyFor, readClock } from './checks.js';
import { Deadlines } from './deadlines.js';
import { decisionOf } from './result.js';
import { storedReads } from './stored.js';
import { type Submitter, submitter } from './submit.js';
import { type TogetherAnswer, type Unanswered, Waits } from './waits.js';

export type { CallParts } from '../operations.js';

/** A store that decides in process, at once (the memory store). */
type InProcess = Required<Pick<Store, 'decideNow'>>;

/**
 * One limiter: the pipeline every call of it goes through. A call is plain data; the store answers
 * this object (it is the store's reply), which finishes the decision and resolves the call's
 * promise. What the answer is comes from its Answers (deny cache, health, failure policy, hooks).
 */
export class Pipeline implements StoreReply<Call> {
  readonly name: string;
  readonly policy: Policy;
  readonly store: Store;
  readonly clock: (() => number) | undefined;
  readonly enforce: boolean;
  readonly timeoutMs: number;
  /** Whether decisions read what operators stored for identifiers (LimiterOptions.overrides). */
  readonly overrides: boolean;
  readonly #answers: Answers;
  readonly #calls: Deadlines<Call>;
  /** Resets and calls decided together, within the deadline. */
  readonly #waits: Waits;
  readonly #target: Submitter;
  /** The store's in-process fast path (the memory store's `decideNow`), if it has one. */
  readonly #inProcess: InProcess | undefined;
  /**
   * The in-process store when a limit or peek of the limiter's own policy needs nothing but its
   * checks and the store: the store's clock, no stored limits to read, no leases (see run).
   */
  readonly #direct: InProcess | undefined;
  /** Whether calls look at the deny cache first (Answers.caching). */
  readonly #caching: boolean;
  /** The store said once it could decide: it has connected, and later outages are not waited for. */
  #ready = false;
  /** The call the next in-process decision of the limiter's own methods reuses (see run). */
  #spare: Call | undefined;
  /** Chooses each new call's policy in place of `policy` (see choosePolicy). */
  #choose: (() => Policy) | undefined;

  constructor(options: ResolvedLimiterOptions) {
    const { store, policy, name } = options;
    this.name = name;
    this.policy = policy;
    this.store = store;
    this.clock = options.clock;
    this.enforce = options.enforce;
    this.timeoutMs = options.timeoutMs;
    this.overrides = options.overrides;
    this.#answers = new Answers(options);
    this.#caching = this.#answers.caching;
    this.#calls = new Deadlines<Call>(options.timeoutMs, this.#expired);
    store.attached?.({ name, timeoutMs: options.timeoutMs });
    this.#target = submitter(store);
    this.#waits = new Waits(this.#target, options.timeoutMs);
    this.#inProcess = typeof store.decideNow === 'function' ? (store as InProcess) : undefined;
    if (this.#inProcess !== undefined) this.#spare = new Call(name, policy, 'peek', '', 1, undefined);
    const direct = this.clock === undefined && !this.overrides && policy.leaseMs === undefined;
    this.#direct = direct ? this.#inProcess : undefined;
    if (options.metrics !== undefined) this.attach(options.metrics);
  }

  /** Counts this limiter's decisions in a recorder too, from now on (once per recorder). */
  attach(recorder: MetricsRecorder): void {
    this.#answers.attach(recorder);
  }

  /**
   * Calls `observer` with every decision of this limiter from now on, the fast path's included
   * (see DecisionObserver); the fast path stays on.
   */
  observe(observer: DecisionObserver): void {
    this.#answers.observe(observer);
  }

  /** The limiter's time for a call: its clock's reading, `undefined` for the store's, or the clock's error. */
  time(): number | SluiceError | undefined {
    return this.clock === undefined ? undefined : readClock(this.clock);
  }

  /**
   * From now on each new call runs under the policy `choose` returns when it is made, in place of
   * `policy` (one of the same rule and limit with other parameters): a budget's region decides with
   * or without its floor as its lease on it stands at that moment.
   */
  choosePolicy(choose: () => Policy): void {
    this.#choose = choose;
  }

  /** The policy a call runs under (the limiter's, or its variant for `limit`), or why the call is refused. */
  check(operation: Operation, identifier: unknown, amount: unknown, parts?: CallParts): Policy | SluiceError {
    const own = this.#choose === undefined ? this.policy : this.#choose();
    const policy = parts?.limit === undefined ? own : policyFor(own, parts.limit);
    if (policy instanceof SluiceError) return policy;
    // Read inline for the usual policy (see entryOf): no function entered on a decision's path.
    const entry = policy.leaseMs === undefined ? OPERATIONS[operation] : entryOf(operation, policy);
    const invalid =
      checkIdentifier(identifier) ??
      entry.checkAmount(entry.amountOption, amount, policy) ??
      (parts?.tag === undefined ? undefined : checkTag(parts.tag));
    return invalid ?? policy;
  }

  /** A checked call, or why it is refused; its time (`now`) is the caller's to set (see `time`). */
  prepare(operation: Operation, identifier: unknown, amount: unknown, parts?: CallParts): Call | SluiceError {
    const policy = this.check(operation, identifier, amount, parts);
    if (policy instanceof SluiceError) return policy;
    const call = new Call(this.name, policy, operation, identifier as string, amount as number, parts?.tag);
    if (this.overrides) call.storedReads = storedReads(this.policy, operation, parts?.limit);
    return call;
  }

  /** Tells the limiter's recorders of a request the middleware's `deny` list refused before asking it. */
  listDenied(): void {
    this.#answers.listDenied();
  }

  /** Forgets this process's remembered denials of an identifier (its stored limit or denial changed). */
  forgetDenial(identifier: string, tag: string | undefined): void {
    this.#answers.forgetDenial(identifier, tag);
  }

  /**
   * A call of the limiter's own methods, checked and decided. Nothing keeps such a call once it is
   * decided: in process, one object serves call after call (a hook that calls the limiter meanwhile
   * gets a new one).
   */
  run(
    operation: Operation,
    identifier: string,
    amount: number,
    parts: CallParts | undefined,
    given?: readonly string[] | SluiceError,
  ): Promise<Decision> {
    const direct = this.#direct;
    const spare = this.#spare;
    if (
      direct !== undefined &&
      spare !== undefined &&
      (parts === undefined || (parts.tag === undefined && parts.limit === undefined)) &&
      given === undefined &&
      (operation === 'limit' || operation === 'peek') &&
      this.#answers.plain
    ) {
      // The usual call, checked as `check` does for these two operations, decided as below.
      const own = this.#choose === undefined ? this.policy : this.#choose();
      const invalid = checkIdentifier(identifier) ?? checkUnits('cost', amount, own);
      if (invalid !== undefined) return Promise.reject(invalid);
      return this.#plain(direct, spare.renew(own, operation, identifier, amount, undefined));
    }
    const policy = this.check(operation, identifier, amount, parts);
    if (policy instanceof SluiceError) return Promise.reject(policy);
    // The operands the caller gave (a lease to release), checked by the caller, or the call's own (a new lease's id).
    if (given instanceof SluiceError) return Promise.reject(given);
    const memory = this.#inProcess;
    if (memory !== undefined && spare !== undefined && this.clock === undefined) {
      const call = spare.renew(policy, operation, identifier, amount, parts?.tag);
      call.operands = given ?? call.operands;
      if (this.overrides) call.storedReads = storedReads(this.policy, operation, parts?.limit);
      // In process with nothing but the store's result to answer (see Answers.plain): a path short
      // enough for the compiler to take in whole, and no hook that could call the limiter meanwhile.
      if (this.#answers.plain) return this.#plain(memory, call);
      this.#spare = undefined;
      const answer = this.#decideNow(memory, call);
      this.#spare = spare;
      return answer;
    }
    const call = new Call(this.name, policy, operation, identifier, amount, parts?.tag);
    call.operands = given ?? call.operands;
    if (this.overrides) call.storedReads = storedReads(this.policy, operation, parts?.limit);
    // As time() reads it, written out: this is every call's way to a store that does I/O.
    const clock = this.clock;
    const now = clock === undefined ? undefined : readClock(clock);
    if (now instanceof SluiceError) return Promise.reject(now);
    call.now = now;
    return this.decide(call);
  }

  /**
   * Decides one call: the deny cache, then the store in process, or (once its first connection is
   * made) within the deadline, or the failure policy while the call's shard is failing.
   */
  decide(call: Call): Promise<Decision> {
    const memory = this.#inProcess;
    if (memory !== undefined) return this.#decideNow(memory, call);
    const cached = this.#caching ? this.#answers.cached(call) : undefined;
    if (cached !== undefined) return Promise.resolve(cached);
    const connecting = this.#ready ? undefined : this.#connecting();
    if (connecting !== undefined) {
      return connecting.then(
        () => this.#ask(call),
        (error: unknown) => this.#unanswered(call, 'store-error', error),
      );
    }
    return this.#ask(call);
  }

  /** A process just started waits for its store's first connection rather than fail open (or closed) at once. */
  #connecting(): Promise<void> | undefined {
    const connecting = this.store.untilReady?.();
    if (connecting === undefined) this.#ready = true;
    return connecting;
  }

  /** An in-process decision that the store's result answers alone (see Answers.plain). */
  #plain(memory: InProcess, call: Call): Promise<Decision> {
    const answers = this.#answers;
    // Recorders time one decision in 16 (NaN for the others), as on the full path.
    const askedAt = answers.timesThisOne() ? performance.now() : Number.NaN;
    let result: StoreResult;
    try {
      result = memory.decideNow(call);
    } catch (error) {
      return this.#failedNow(call, error);
    }
    if (result.stored !== undefined) underStoredLimit(call, result);
    const decision = decisionOf(result, call);
    answers.plainDecided(call, decision, Number.isNaN(askedAt) ? askedAt : performance.now() - askedAt);
    return Promise.resolve(decision);
  }

  /** Decides in process, at once: the promise is settled when it is returned. */
  #decideNow(memory: InProcess, call: Call): Promise<Decision> {
    const answers = this.#answers;
    if (this.#caching) {
      const cached = answers.cached(call);
      if (cached !== undefined) return Promise.resolve(cached);
    }
    answers.asking(call);
    let result: StoreResult;
    try {
      result = memory.decideNow(call);
    } catch (error) {
      return this.#failedNow(call, error);
    }
    return Promise.resolve(answers.decision(call, result));
  }

  /** An in-process store threw: the failure policy's answer, or the rejection (see #unanswered). */
  #failedNow(call: Call, error: unknown): Promise<Decision> {
    try {
      return Promise.resolve(this.#unanswered(call, 'store-error', error));
    } catch (rejected) {
      return Promise.reject(rejected);
    }
  }

  /** Asks the store within the deadline; the first of its answer and the deadline decides the call. */
  #ask(call: Call): Promise<Decision> {
    if (!this.#answers.ask(call)) return Promise.resolve(this.#answers.skipped(call));
    return new Promise<Decision>((resolve, reject) => {
      call.resolve = resolve;
      call.reject = reject;
      this.#calls.track(call);
      try {
        this.#target.submit([call], this);
      } catch (error) {
        this.failed(call, error);
      }
    });
  }

  /** The store's answer to a call of `decide` (StoreReply); after the deadline it is dropped. */
  answered(call: Call, result: StoreResult): void {
    if (this.#calls.stop(call)) call.resolve(this.#answers.decision(call, result));
  }

  /** The store's failure of a call of `decide` (StoreReply); after the deadline it is dropped. */
  failed(call: Call, error: unknown): void {
    if (this.#calls.stop(call)) this.#finish(call, 'store-error', error);
  }

  readonly #expired = (call: Call): void => this.#finish(call, 'timeout', undefined);

  #finish(call: Call, failure: StoreFailure, error: unknown): void {
    try {
      call.resolve(this.#unanswered(call, failure, error));
    } catch (rejected) {
      call.reject(rejected as SluiceError);
    }
  }

  /**
   * A call the store did not answer: the failure policy's decision, or, for an operation whose
   * store failure rejects (OperationEntry.onStoreFailure), the error thrown.
   */
  #unanswered(call: Call, failure: StoreFailure, error: unknown): Decision {
    if (entryOf(call.operation, call.policy).onStoreFailure === 'policy')
      return this.#answers.failure(call, failure, error);
    throw this.#answers.noted(call, failure, error);
  }

  /** A wait for a slot began or ended, or an upstream paused an identifier: the limiter's recorders hear of it. */
  waited(event: WaitEvent): void {
    this.#answers.waited(event);
  }

  /** The deny cache's phase for a call of a group (see Answers.cached). */
  cached(call: Call): Decision | undefined {
    return this.#answers.cached(call);
  }

  /** Whether a call of a group may go to the store (see Answers.admit). */
  admit(call: Call): boolean {
    return this.#answers.admit(call);
  }

  /** A call of a group admitted as a probe that was not sent (see Answers.unadmit). */
  unadmit(call: Call): void {
    this.#answers.unadmit(call);
  }

  /** The decision a store's result makes for a call of a group. */
  decision(call: Call, result: StoreResult): Decision {
    return this.#answers.decision(call, result);
  }

  /** The failure policy's decision for a call of a group the store failed. */
  failure(call: Call, failure: StoreFailure, error: unknown): Decision {
    return this.#answers.failure(call, failure, error);
  }

  /** The failure policy's decision for a call of a group not sent (another call probes its shard). */
  skipped(call: Call): Decision {
    return this.#answers.skipped(call);
  }

  /**
   * Gives back, in the fallback store, what a fallback decision took (`back` is the call that gives
   * back), or renews a lease it holds (see follow-up.ts).
   */
  giveBackFallback(back: Call): Decision | undefined {
    return this.#answers.giveBackFallback(back);
  }

  /**
   * Asks the store to decide calls of this limiter's store together (see Store.submit), within the
   * deadline: their results in order, or why there are none. The calls were checked (see Group).
   */
  together(calls: readonly Call[], keys: readonly string[]): Promise<TogetherAnswer> {
    const connecting = this.#ready ? undefined : this.#connecting();
    if (connecting === undefined) return this.#waits.together(calls, keys);
    return connecting.then(
      () => this.#waits.together(calls, keys),
      (error: unknown): Unanswered => ({ failure: 'store-error', error }),
    );
  }

  /** Forgets an identifier everywhere this limiter keeps it (OPERATIONS.reset); rejects with the store's error. */
  reset(identifier: string, tag: string | undefined): Promise<void> {
    const invalid = checkIdentifier(identifier) ?? checkTag(tag);
    if (invalid !== undefined) return Promise.reject(invalid);
    this.#answers.forget(this.name, identifier, tag);
    const { store, name } = this;
    const start = () =>
      tag === undefined ? store.reset(name, identifier) : store.reset(name, identifier, tag);
    const timedOut = (): SluiceError => this.#answers.timeoutError();
    return this.#waits.reset(start, timedOut).catch((thrown: unknown) => {
      // A timeout's error is a SluiceError already (ERR_SLUICE_TIMEOUT): kept as it is.
      const error = storeError(store.kind, thrown);
      const source = error.code === ERROR_CODES.TIMEOUT ? 'timeout' : 'store-error';
      const context = { name, identifier, operation: 'reset', cost: 0, source, storeMs: 0 } as const;
      this.#answers.resetFailed(error, { ...context, enforced: this.enforce });
      throw error;
    });
  }
}
