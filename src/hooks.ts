// Hooks for metrics and logs: their types, and the one caller that keeps a failing hook away from the decision.
import type { BudgetView } from './budget/view.js';
import type { SluiceError } from './errors.js';
import type { Decision, Operation, Policy, Store } from './types.js';

/**
 * How a decision was made: `store`, the store decided; `cache`, the deny cache answered and the
 * store was not asked; `timeout` and `store-error`, the store failed this call and the failure
 * policy answered; `skipped`, the store was known to be down and was not asked (another call is
 * probing it) and the failure policy answered.
 */
export type DecisionSource = 'store' | 'cache' | 'timeout' | 'store-error' | 'skipped';

/** What a hook is told about the call behind a decision or an error. */
export interface HookContext {
  /** The limiter's `name`. */
  readonly name: string;
  readonly identifier: string;
  /** `reset` only reaches `onError`. */
  readonly operation: Operation | 'reset';
  /** The cost asked (or the amount refunded); 0 for `reset`. */
  readonly cost: number;
  /**
   * For decisions with reason `store-error`, `timeout` or `fallback`: the failure that led to it
   * (code `ERR_SLUICE_STORE` with the client's error as `cause`, or `ERR_SLUICE_TIMEOUT`).
   */
  readonly error?: SluiceError;
  /** How the decision was made (see {@link DecisionSource}); `store-error` or `timeout` for `onError`. */
  readonly source: DecisionSource;
  /**
   * Milliseconds the store took to answer, with fractions, when `source` is `store`; otherwise 0.
   * Reading the clock twice costs about what an in-process decision does: one decision in 16 is
   * timed (the first among them), and the others say `NaN`.
   */
  readonly storeMs: number;
  /** `false` in shadow mode: the caller was allowed whatever the decision says. */
  readonly enforced: boolean;
  /** The shard that decided or failed (a cluster primary's address), when the store has several. */
  readonly shard?: string;
}

/**
 * Turns decisions into numbers (see `sluice/metrics`: `prometheusMetrics()`,
 * `openTelemetryMetrics()`). One recorder may serve many limiters; it is told of each at creation.
 */
export interface MetricsRecorder {
  /**
   * A limiter was created with this recorder: its label values can be made ready (counters at 0).
   * A recorder may return a {@link DecisionCounter} for this limiter, which is then called instead of
   * `record`, without a context object.
   */
  register(limiter: {
    readonly name: string;
    readonly policy: Policy;
    readonly store: Store;
    readonly enforced: boolean;
    // biome-ignore lint/suspicious/noConfusingVoidType: a recorder whose register() returns nothing (void) stays valid
  }): DecisionCounter | undefined | void;
  /**
   * Once per decision, with the verdict as the policy gave it (before shadow mode), after
   * `onDecision`, unless `register` returned a counter. The context object is reused for the next
   * decision: read it, do not keep it.
   */
  record(decision: Decision, context: HookContext): void;
  /** The store's health as a limiter sees it changed: `up` is false while the failure policy answers. */
  health(name: string, up: boolean, shard: string | undefined): void;
  /** Calls waiting for a slot on a limiter (`wait()`, `throttle()`), as they begin and end. Optional. */
  waited?(name: string, event: WaitEvent): void;
  /**
   * A limiter with a global `budget` was made: `view` reads what its region holds and asks, at any
   * time (see docs/regions.md). Optional.
   */
  budget?(name: string, view: () => BudgetView): void;
  /**
   * A request that a deny list refused before the limiter was asked: `middleware`, the HTTP
   * middleware's `deny` option. (Denials of `limiter.deny()` are decisions: `record` gets them,
   * with `reason: 'denied'`.) Optional.
   */
  listDenied?(name: string, list: DenyList): void;
}

/** Which deny list refused a request: `store`, the limiter's stored denials; `middleware`, the middleware's `deny` option. */
export type DenyList = 'store' | 'middleware';

/**
 * What a recorder hears of calls that wait for a slot: one began waiting (`waiting`); one ended
 * (`done`), allowed to go after `waitedMs` or not (refused, aborted, failed); an upstream's answer
 * paused the identifier for `pauseMs` (`paused`, from `throttle()`); or a throttled call's wait for
 * a lease of its `concurrency` limiter ended (`leased`, heard on that limiter), with one after
 * `waitedMs` or without (out of time, aborted).
 */
export type WaitEvent =
  | { readonly kind: 'waiting' }
  | { readonly kind: 'done'; readonly waitedMs: number; readonly allowed: boolean }
  | { readonly kind: 'paused'; readonly pauseMs: number }
  | { readonly kind: 'leased'; readonly waitedMs: number; readonly allowed: boolean };

/** What a {@link DecisionCounter} is told of the call behind a decision (read it, do not keep it). */
export type CountedCall = Pick<HookContext, 'identifier' | 'operation' | 'cost'> & {
  /** The call's hash tag, when it named one (see `CallOptions.tag`). */
  readonly tag?: string | undefined;
};

/**
 * Counts one limiter's decisions for a recorder: what `register` may return, so that a decision
 * costs a call with the parts the recorder reads rather than a context object filled for it.
 */
export interface DecisionCounter {
  count(decision: Decision, call: CountedCall, source: DecisionSource, storeMs: number): void;
}

/**
 * Hears every decision of a limiter, on every path (the in-process fast path included), with the
 * verdict as the policy gave it, before the caller gets it: how a feature built on a limiter watches
 * it (a global budget's worker) without turning the fast path off as a recorder does. It is called
 * in the decision's path: keep it cheap and synchronous, never throw, never call the limiter.
 */
export type DecisionObserver = (decision: Decision, call: CountedCall, source: DecisionSource) => void;

/**
 * Called once per decision with the verdict as the policy gave it: in shadow mode (`enforce: false`)
 * it sees the denials callers do not. Runs before the caller gets the decision, so keep it cheap.
 */
export type DecisionHook = (decision: Decision, context: HookContext) => void;

/** Called once per call that the store failed or did not answer in time. */
export type ErrorHook = (error: SluiceError, context: HookContext) => void;

const warned = new WeakSet<object>();

/** Reports a hook that threw, once per hook, as a process warning. */
export function reportHookFailure(hookName: string, hook: object, error: unknown): void {
  // Once per hook: a hook that throws on every call must not flood the log.
  if (warned.has(hook)) return;
  warned.add(hook);
  const message = error instanceof Error ? error.message : String(error);
  process.emitWarning(
    `sluice: the ${hookName} hook failed (${message}); decisions go on without it. Shown once per hook.`,
    { type: 'SluiceWarning', code: 'SLUICE_HOOK_FAILED' },
  );
}

/** Calls a hook; what it throws (or a promise it returns rejects with) becomes one warning, never the caller's problem. */
export function callHook<A>(
  hookName: string,
  hook: (value: A, context: HookContext) => unknown,
  value: A,
  context: HookContext,
): void {
  try {
    const returned = hook(value, context);
    if (typeof (returned as PromiseLike<unknown> | undefined)?.then === 'function') {
      (returned as PromiseLike<unknown>).then(undefined, (error: unknown) =>
        reportHookFailure(hookName, hook, error),
      );
    }
  } catch (error) {
    reportHookFailure(hookName, hook, error);
  }
}
