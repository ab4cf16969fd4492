// What a limiter tells the outside about its decisions: the onDecision and onError hooks, and metrics recorders.
import type { SluiceError } from '../errors.js';
import {
  callHook,
  type DecisionCounter,
  type DecisionHook,
  type DecisionSource,
  type ErrorHook,
  type HookContext,
  type MetricsRecorder,
  reportHookFailure,
  type WaitEvent,
} from '../hooks.js';
import type { Decision, Policy, Store } from '../types.js';
import type { Call } from './call.js';

/** What reporting knows of its limiter. */
export interface Reported {
  readonly name: string;
  readonly policy: Policy;
  readonly store: Store;
  readonly enforce: boolean;
  readonly onDecision: DecisionHook | undefined;
  readonly onError: ErrorHook | undefined;
}

/** A recorder with the counter its `register` returned, called instead of `record` when there is one. */
type Attached = { readonly recorder: MetricsRecorder; readonly counter: DecisionCounter | undefined };

type MutableContext = { -readonly [K in keyof HookContext]: HookContext[K] | undefined };

/**
 * One limiter's hooks and recorders. Contexts are built only for hooks; a recorder gets the counter
 * its `register` returned, or a context reused from one decision to the next.
 */
export class Reporting {
  readonly #limiter: Reported;
  /** Each recorder with the counter its `register` returned. */
  readonly #recorders: Attached[] = [];
  #observed: boolean;
  /** The one counter when it is all there is to report to (no onDecision, one recorder that counts). */
  #only: DecisionCounter | undefined;
  #untimed = 0;
  /** A context reused for the recorders alone (they keep nothing of it once `record` returns). */
  readonly #scratch: MutableContext;

  constructor(limiter: Reported) {
    this.#limiter = limiter;
    this.#observed = limiter.onDecision !== undefined;
    this.#scratch = {
      name: limiter.name,
      identifier: '',
      operation: 'limit',
      cost: 0,
      source: 'store',
      storeMs: 0,
      enforced: limiter.enforce,
      error: undefined,
      shard: undefined,
    };
  }

  /** Whether anyone listens to decisions: only then are contexts built and store times taken. */
  get observed(): boolean {
    return this.#observed;
  }

  /** Counts the limiter's decisions in a recorder too, from now on (once per recorder). */
  attach(recorder: MetricsRecorder): void {
    if (this.#recorders.some((attached) => attached.recorder === recorder)) return;
    const { name, policy, store, enforce } = this.#limiter;
    const counter = recorder.register({ name, policy, store, enforced: enforce });
    const counts = typeof counter === 'object' && counter !== null && typeof counter.count === 'function';
    this.#recorders.push({ recorder, counter: counts ? counter : undefined });
    this.#observed = true;
    const only = this.#recorders.length === 1 ? this.#recorders[0]?.counter : undefined;
    this.#only = this.#limiter.onDecision === undefined ? only : undefined;
  }

  /**
   * Whether every listener only counts: no onDecision hook, and each recorder counts through the
   * counter its `register` returned. Such decisions may take the in-process fast path.
   */
  get countsOnly(): boolean {
    return this.#limiter.onDecision === undefined && this.#recorders.every((r) => r.counter !== undefined);
  }

  /**
   * The one counter there is to report to, when it is all there is (no onDecision, one recorder,
   * which counts): the fast path calls it directly (see Answers.counter).
   */
  get only(): DecisionCounter | undefined {
    return this.#only;
  }

  /** Whether to time this decision: the first, then one in 16 (`storeMs` is NaN for the others). */
  timesThisOne(): boolean {
    return (this.#untimed++ & 15) === 0;
  }

  /** Reports a decision (the real one, before shadow mode) to onDecision and every recorder. */
  decided(call: Call, decision: Decision, source: DecisionSource, storeMs: number): void {
    const only = this.#only;
    if (only !== undefined) {
      try {
        only.count(decision, call, source, storeMs);
      } catch (error) {
        this.counterFailed(error);
      }
      return;
    }
    const onDecision = this.#limiter.onDecision;
    if (onDecision !== undefined) {
      callHook('onDecision', onDecision, decision, this.context(call, source, storeMs));
    }
    const recorders = this.#recorders;
    for (let i = 0; i < recorders.length; i++) {
      const { recorder, counter } = recorders[i] as Attached;
      try {
        if (counter !== undefined) counter.count(decision, call, source, storeMs);
        else this.#record(recorder, decision, call, source, storeMs);
      } catch (error) {
        reportHookFailure('metrics', recorder, error);
      }
    }
  }

  /** The one counter (see `only`) threw: reported as its recorder's failure. */
  counterFailed(error: unknown): void {
    reportHookFailure('metrics', (this.#recorders[0] as Attached).recorder, error);
  }

  /** Reports a store failure to onError, with the context of the call it failed. */
  failed(error: SluiceError, context: HookContext): void {
    const onError = this.#limiter.onError;
    if (onError !== undefined) callHook('onError', onError, error, context);
  }

  /** Whether anyone hears of failures (so that a context is worth building). */
  get hearsFailures(): boolean {
    return this.#limiter.onError !== undefined;
  }

  /** A call waiting for a slot began or ended, or an upstream paused an identifier: recorders that count waits hear of it. */
  waited(event: WaitEvent): void {
    for (const { recorder } of this.#recorders) {
      if (typeof recorder.waited !== 'function') continue;
      try {
        recorder.waited(this.#limiter.name, event);
      } catch (error) {
        reportHookFailure('metrics', recorder, error);
      }
    }
  }

  /** A request the middleware's `deny` list refused before this limiter was asked: every recorder hears of it. */
  listDenied(): void {
    for (const { recorder } of this.#recorders) {
      try {
        recorder.listDenied?.(this.#limiter.name, 'middleware');
      } catch (error) {
        reportHookFailure('metrics', recorder, error);
      }
    }
  }

  /** A shard went down or came back: every recorder hears of it. */
  health(up: boolean, shard: string | undefined): void {
    for (const { recorder } of this.#recorders) recorder.health(this.#limiter.name, up, shard);
  }

  /** What hooks are told of a call. */
  context(call: Call, source: DecisionSource, storeMs: number): HookContext {
    const context: { -readonly [K in keyof HookContext]: HookContext[K] } = {
      name: this.#limiter.name,
      identifier: call.identifier,
      operation: call.operation,
      cost: call.cost,
      source,
      storeMs,
      enforced: this.#limiter.enforce,
    };
    if (call.error !== undefined) context.error = call.error;
    if (call.shard !== undefined) context.shard = call.shard;
    return context;
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
}
