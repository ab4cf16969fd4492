import { performance } from 'node:perf_hooks';
import { SluiceError } from '../errors.js';
import type { DecisionCounter, DecisionObserver, MetricsRecorder, WaitEvent } from '../hooks.js';
import { type CallParts, checkUnits, entryOf, OPERATIONS } from '../operations.js';
import type { ResolvedLimiterOptions } from '../options.js';
import type { Decision, Operation, Policy, Store, StoreReply, StoreResult } from '../types.js';
import { Answers, type InProcess, underStoredLimit } from './answers.js';
import { Call, type EntryOptions, type KeptCall } from './call.js';
import { checkIdentifier, checkTag, policyFor, readClock } from './checks.js';
import { Deadlines } from './deadlines.js';
import { decisionOf } from './result.js';
import { storedReads } from './stored.js';
import { type Submitter, submitter } from './submit.js';
import { type Batched, type BatchRequest, decideAtomic, type Member, sideBySide } from './together.js';
import { Waits } from './waits.js';

export type { CallParts } from '../operations.js';
export type { EntryOptions, KeptCall } from './call.js';
export type { Batched, BatchRequest } from './together.js';

/**
 * One limiter: the pipeline every call of it goes through, by one of two ways in: `call` for a call,
 * `Pipeline.batch` for calls of several limiters decided as one. A call is plain data; the store
 * answers the pipeline's reply, which finishes the decision and resolves the call's promise. What
 * the answer is comes from its Answers (deny cache, health, failure policy, hooks).
 */
export class Pipeline {
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
   * checks and the store: the store's clock, no stored limits to read, no leases (see call).
   */
  readonly #direct: InProcess | undefined;
  /** Whether calls look at the deny cache first (Answers.caching). */
  readonly #caching: boolean;
  /** The store said once it could decide: it has connected, and later outages are not waited for. */
  #ready = false;
  /** Fast-path decisions since the last timed one, for a sole counter (see #plain). */
  #untimed = 0;
  /** The call the next in-process decision of the limiter's own methods reuses (see call). */
  #spare: Call | undefined;
  /** Chooses each new call's policy in place of `policy` (see choosePolicy). */
  #choose: (() => Policy) | undefined;
  /** What a batch's deciding needs of this limiter (see Pipeline.batch). */
  readonly #member: Member;

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
    this.#member = {
      answers: this.#answers,
      enforce: this.enforce,
      timeoutMs: this.timeoutMs,
      decide: (call) => this.#decide(call),
      together: (calls, keys) =>
        this.#waits.together(calls, keys, this.#ready ? undefined : this.#connecting()),
    };
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
    const call = this.#prepare(operation, identifier, amount, parts, undefined, undefined);
    return call instanceof SluiceError ? call : call.policy;
  }

  /**
   * A checked call (`spare` renewed, or a new one), or why it is refused; its time (`now`) is set by
   * the entry that makes it. A follow-up (`after`) runs under the policy the first call ran under
   * (a stored limit's variant included), on its identifier and tag.
   */
  #prepare(
    operation: Operation,
    identifier: unknown,
    amount: unknown,
    parts: CallParts | undefined,
    after: KeptCall | undefined,
    spare: Call | undefined,
  ): Call | SluiceError {
    const first = after?.call;
    if (first !== undefined)
      return new Call(this.name, first.policy, operation, first.identifier, amount as number, first.tag);
    const own = this.#choose === undefined ? this.policy : this.#choose();
    const policy = parts?.limit === undefined ? own : policyFor(own, parts.limit);
    if (policy instanceof SluiceError) return policy;
    // Read inline for the usual policy (see entryOf): no function entered on a decision's path.
    const entry = policy.leaseMs === undefined ? OPERATIONS[operation] : entryOf(operation, policy);
    const invalid =
      checkIdentifier(identifier) ??
      entry.checkAmount(entry.amountOption, amount, policy) ??
      (parts?.tag === undefined ? undefined : checkTag(parts.tag));
    if (invalid !== undefined) return invalid;
    const id = identifier as string;
    const call =
      spare === undefined
        ? new Call(this.name, policy, operation, id, amount as number, parts?.tag)
        : spare.renew(policy, operation, id, amount as number, parts?.tag);
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
   * The core's one way in for a call: checked, timed and decided (the deny cache, then the store in
   * process, or within the deadline once its first connection is made, or the failure policy while
   * the call's shard is failing). Nothing keeps a call of the limiter's own methods once it is
   * decided: in process, one object serves call after call (a hook that calls the limiter meanwhile
   * gets a new one). `options` serve the core's holders: see EntryOptions.
   */
  call(
    operation: Operation,
    identifier: string,
    amount: number,
    parts?: CallParts,
    options?: EntryOptions,
  ): Promise<Decision> {
    const direct = this.#direct;
    const spare = this.#spare;
    if (
      direct !== undefined &&
      spare !== undefined &&
      (parts === undefined || (parts.tag === undefined && parts.limit === undefined)) &&
      options === undefined &&
      (operation === 'limit' || operation === 'peek') &&
      this.#answers.plain
    ) {
      // The usual call, checked as `check` does for these two operations, decided as below.
      const own = this.#choose === undefined ? this.policy : this.#choose();
      const invalid = checkIdentifier(identifier) ?? checkUnits('cost', amount, own);
      if (invalid !== undefined) return Promise.reject(invalid);
      return this.#plain(direct, spare.renew(own, operation, identifier, amount, undefined));
    }
    const after = options?.after;
    const memory = this.#inProcess;
    if (memory !== undefined && spare !== undefined && this.clock === undefined && after === undefined) {
      // A call its caller keeps (EntryOptions.hold) is an object of its own; any other reuses the spare.
      const hold = options?.hold;
      const call = this.#prepare(
        operation,
        identifier,
        amount,
        parts,
        undefined,
        hold === undefined ? spare : undefined,
      );
      if (call instanceof SluiceError) return Promise.reject(call);
      // The operands the caller gave (a lease to release), checked by the caller, or the call's own (a new lease's id).
      const given = options?.operands;
      if (given instanceof SluiceError) return Promise.reject(given);
      if (given !== undefined) call.operands = given;
      if (hold !== undefined) hold.call = call;
      // In process with nothing but the store's result to answer (see Answers.plain): a path short
      // enough for the compiler to take in whole, and no hook that could call the limiter meanwhile.
      if (this.#answers.plain) return this.#plain(memory, call);
      this.#spare = undefined;
      const answer = this.#decideNow(memory, call);
      this.#spare = spare;
      return answer;
    }
    // Every call's way to a store that does I/O, and the calls the core keeps (EntryOptions).
    const call = this.#prepare(operation, identifier, amount, parts, after, undefined);
    if (call instanceof SluiceError) return Promise.reject(call);
    const operands = options?.operands;
    if (operands instanceof SluiceError) return Promise.reject(operands);
    if (operands !== undefined) call.operands = operands;
    if (options?.hold !== undefined) options.hold.call = call;
    const fallback = after !== undefined && after.decision.reason === 'fallback';
    // A give-back of a fallback decision is decided at the time of what it gives back; anything else, now.
    const clock = this.clock;
    const now =
      fallback && operation !== 'extend'
        ? after.call.now
        : clock === undefined
          ? undefined
          : readClock(clock);
    if (now instanceof SluiceError) return Promise.reject(now);
    call.now = now;
    // The fallback store keeps what it decided as long as the process runs: its answer is there.
    if (fallback) return Promise.resolve(this.#answers.giveBackFallback(call) ?? after.decision);
    return this.#decide(call);
  }

  /**
   * The core's one way in for a batch: every call checked (the first problem rejects, before
   * anything is asked), then decided side by side, or (`atomic`) by one script over every key on
   * one time, shadow limiters beside them so that their verdict can never take from the others.
   */
  static async batch(requests: readonly BatchRequest[], atomic: boolean): Promise<Batched> {
    const calls: Call[] = [];
    const members: Member[] = [];
    for (const { pipeline, operation, identifier, amount, parts } of requests) {
      const call = pipeline.#prepare(operation, identifier, amount, parts, undefined, undefined);
      if (call instanceof SluiceError) throw call;
      calls.push(call);
      members.push(pipeline.#member);
    }
    // One script runs at one time: an atomic batch reads one clock (its limiters share it).
    const shared = atomic ? readClock(requests[0]?.pipeline.clock) : undefined;
    if (shared instanceof SluiceError) throw shared;
    for (let i = 0; i < calls.length; i++) {
      const now = atomic ? shared : readClock((requests[i] as BatchRequest).pipeline.clock);
      if (now instanceof SluiceError) throw now;
      (calls[i] as Call).now = now;
    }
    const store = requests[0]?.pipeline.store;
    const decided =
      atomic && store !== undefined
        ? await decideAtomic(store, members, calls)
        : await sideBySide(members, calls);
    return { ...decided, calls, errors: calls.map((call) => call.error) };
  }

  /** Decides one checked and timed call (see `call`). */
  #decide(call: Call): Promise<Decision> {
    const memory = this.#inProcess;
    if (memory !== undefined) return this.#decideNow(memory, call);
    const cached = this.#caching ? this.#answers.cached(call) : undefined;
    if (cached !== undefined) return Promise.resolve(cached);
    const connecting = this.#ready ? undefined : this.#connecting();
    if (connecting !== undefined) {
      return connecting.then(
        () => this.#ask(call),
        (error: unknown) => this.#answers.unansweredNow(call, error),
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

  /**
   * An in-process decision that the store's result answers alone (see Answers.plain), reported to a
   * sole counter (Answers.counter) directly. Recorders time one decision in 16, which #timedPlain
   * takes: this path reads no clock (storeMs NaN), which keeps the compiled code free of it.
   */
  #plain(memory: InProcess, call: Call): Promise<Decision> {
    const answers = this.#answers;
    const counter = answers.counter;
    const timed = counter === undefined ? answers.timesThisOne() : (this.#untimed++ & 15) === 0;
    if (timed) return this.#timedPlain(memory, call, counter);
    const decision = this.#plainDecision(memory, call);
    if (decision instanceof Promise) return decision;
    this.#answers.counted(counter, call, decision, Number.NaN);
    return Promise.resolve(decision);
  }

  /** #plain's decision timed for the recorders. */
  #timedPlain(memory: InProcess, call: Call, counter: DecisionCounter | undefined): Promise<Decision> {
    const askedAt = performance.now();
    const decision = this.#plainDecision(memory, call);
    if (decision instanceof Promise) return decision;
    this.#answers.counted(counter, call, decision, performance.now() - askedAt);
    return Promise.resolve(decision);
  }

  /** The store's decision of #plain, or the failure policy's answer when the store threw. */
  #plainDecision(memory: InProcess, call: Call): Decision | Promise<Decision> {
    let result: StoreResult;
    try {
      // decisionOf copies the result before anything else can ask the store.
      result = memory.decideReused === undefined ? memory.decideNow(call) : memory.decideReused(call);
    } catch (error) {
      return this.#answers.unansweredNow(call, error);
    }
    if (result.stored !== undefined) underStoredLimit(call, result);
    return decisionOf(result, call);
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
      return this.#answers.unansweredNow(call, error);
    }
    return Promise.resolve(answers.decision(call, result));
  }

  /** Asks the store within the deadline; the first of its answer and the deadline decides the call. */
  #ask(call: Call): Promise<Decision> {
    if (!this.#answers.ask(call)) return Promise.resolve(this.#answers.skipped(call));
    return new Promise<Decision>((resolve, reject) => {
      call.resolve = resolve;
      call.reject = reject;
      this.#calls.track(call);
      try {
        this.#target.submit([call], this.#reply);
      } catch (error) {
        this.#reply.failed(call, error);
      }
    });
  }

  /** Where the store answers a call (StoreReply); after the deadline its answer or failure is dropped. */
  readonly #reply: StoreReply<Call> = {
    answered: (call, result) => {
      if (this.#calls.stop(call)) call.resolve(this.#answers.decision(call, result));
    },
    failed: (call, error) => {
      if (this.#calls.stop(call)) this.#answers.settleUnanswered(call, 'store-error', error);
    },
  };

  readonly #expired = (call: Call): void => this.#answers.settleUnanswered(call, 'timeout', undefined);

  /** A wait for a slot began or ended, or an upstream paused an identifier: the limiter's recorders hear of it. */
  waited(event: WaitEvent): void {
    this.#answers.waited(event);
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
      throw this.#answers.resetFailed(thrown, name, identifier);
    });
  }
}
