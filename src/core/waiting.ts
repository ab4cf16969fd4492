// wait(): a call waits until it may go. GCRA and the token bucket hand out a future slot in one store
// call; the windows and the log, which cannot say who comes next, are asked again after their retryAfterMs.
import { performance } from 'node:perf_hooks';
import { invalidOption, SluiceError } from '../errors.js';
import { MAX_WAIT_MS } from '../operations.js';
import { type Decision, isStoreFailure, type Policy, type WaitDecision, type WaitOptions } from '../types.js';
import { knownKeys, optionsObject } from '../validate.js';
import type { Call } from './call.js';
import { readClock } from './checks.js';
import type { CallParts, Pipeline } from './pipeline.js';
import { askSlot, Slot } from './slot.js';

/** The defaults of `wait()`'s options. */
export const WAIT_DEFAULTS = { maxWaitMs: 60_000 } as const;

/**
 * A polling wait sleeps its `retryAfterMs` and up to this much of it again, at random: waiters
 * denied together by a window would otherwise all ask again in the same millisecond.
 */
const JITTER = 0.25;

/**
 * A slot that comes later than its time by more than this (and than one of its intervals) is let go
 * and a new one taken: a process that stalled past its slots (a long synchronous task, a GC pause)
 * would otherwise send every slot it held in one burst. Below it, a timer firing late on a busy
 * machine is not worth another store call.
 *
 * The late slot is not given back. Its time has passed; given back, its unit would come back at the
 * end of the schedule (the TAT moves back by one interval), on the time of the last slot handed out,
 * and two calls would go together there (measured: with give-backs, 4 waits of 5 still went at once
 * after a stall, each give-back undoing the slot another wait had just taken). It is the strict side:
 * the unit of a late slot is spent unused.
 */
export const LATE_SLOT_MS = 100;

/**
 * Whether a slot of `cost` units due at `dueAt` comes too late to be used at `now` (both
 * performance.now() times): later than LATE_SLOT_MS and than the policy's interval for its units,
 * past which the slots handed out after it have come too, and would go together with it.
 */
export function isLateSlot(policy: Policy, cost: number, dueAt: number, now: number): boolean {
  const lateMs = now - dueAt;
  return lateMs > LATE_SLOT_MS && lateMs > (policy.windowMs / policy.limit) * cost;
}

/** wait()'s options, checked. */
interface Resolved {
  readonly cost: number;
  readonly parts: CallParts;
  readonly maxWaitMs: number;
  readonly signal: AbortSignal | undefined;
}

function resolveWait(options: WaitOptions | undefined): Resolved {
  const raw = optionsObject('wait options', options, false);
  knownKeys('wait', raw, ['cost', 'tag', 'limit', 'maxWaitMs', 'signal']);
  const maxWaitMs = checkMaxWaitMs(raw.maxWaitMs);
  const signal = raw.signal as AbortSignal | undefined;
  if (signal !== undefined && !isSignal(signal)) throw invalidOption('signal', 'an AbortSignal', signal);
  const parts = { tag: raw.tag as string | undefined, limit: raw.limit as number | undefined };
  return { cost: (raw.cost as number | undefined) ?? 1, parts, maxWaitMs, signal };
}

/** A `maxWaitMs` option, checked: whole ms from 0 to MAX_WAIT_MS, the default when absent. */
export function checkMaxWaitMs(value: unknown): number {
  const maxWaitMs = value ?? WAIT_DEFAULTS.maxWaitMs;
  if (
    typeof maxWaitMs !== 'number' ||
    !Number.isSafeInteger(maxWaitMs) ||
    maxWaitMs < 0 ||
    maxWaitMs > MAX_WAIT_MS
  ) {
    throw invalidOption('maxWaitMs', `a whole number of milliseconds from 0 to ${MAX_WAIT_MS}`, maxWaitMs);
  }
  return maxWaitMs;
}

function isSignal(value: unknown): value is AbortSignal {
  const signal = value as Partial<AbortSignal> | null;
  return (
    typeof signal === 'object' &&
    signal !== null &&
    typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function'
  );
}

/**
 * Waits until a call may go (see Limiter.wait). The failure policy answers as for `limit`: its
 * grant goes at once, and its denial is asked again after its `retryAfterMs` while `maxWaitMs`
 * allows; a refusal by the store (or the fallback store) is final, and comes at once.
 */
export async function waitFor(
  pipeline: Pipeline,
  identifier: string,
  options: WaitOptions | undefined,
): Promise<WaitDecision> {
  const wait = resolveWait(options);
  const policy = pipeline.check('limit', identifier, wait.cost, wait.parts);
  if (policy instanceof SluiceError) throw policy;
  wait.signal?.throwIfAborted();
  const startedAt = performance.now();
  pipeline.waited({ kind: 'waiting' });
  let allowed = false;
  let waitedMs: number | undefined;
  try {
    const { decision, decidedAt } = policy.schedules
      ? await scheduled(pipeline, identifier, wait, startedAt)
      : await polled(pipeline, identifier, wait, startedAt);
    allowed = decision.allowed;
    waitedMs = performance.now() - startedAt;
    return answer(decision, waitedMs, Math.max(0, clockNow(pipeline) - decidedAt));
  } finally {
    pipeline.waited({ kind: 'done', waitedMs: waitedMs ?? performance.now() - startedAt, allowed });
  }
}

/** A decision, and the time it was asked at (clockNow()): the store decides it then, or a round trip later. */
interface Decided {
  readonly decision: Decision;
  readonly decidedAt: number;
}

/**
 * Now in the clock that measures the decision's times: the limiter's own when it has one (a reset
 * on a clock the caller moves has come closer only as far as that clock moved), else this process's.
 */
function clockNow(pipeline: Pipeline): number {
  const now = readClock(pipeline.clock);
  return typeof now === 'number' ? now : performance.now();
}

/**
 * The decision wait() resolves with: the limiter's fields, how long it waited, and the reset from
 * now. A slot reserved at the start (GCRA, the token bucket) was decided `sinceMs` before the wait
 * ends, and its reset has come that much closer; a window's decision is taken at the end of the
 * wait, and its reset is as the store said.
 */
function answer(decision: Decision, waitedMs: number, sinceMs: number): WaitDecision {
  const answered: { -readonly [K in keyof WaitDecision]: WaitDecision[K] } = {
    allowed: decision.allowed,
    limit: decision.limit,
    remaining: decision.remaining,
    resetMs: Math.max(0, Math.ceil(decision.resetMs - sinceMs)),
    retryAfterMs: decision.retryAfterMs,
    waitedMs,
  };
  if (decision.reason !== undefined) answered.reason = decision.reason;
  if (decision.wouldAllow !== undefined) answered.wouldAllow = decision.wouldAllow;
  // A concurrency limiter's wait took a lease: the caller must have it to release it.
  if (decision.lease !== undefined) answered.lease = decision.lease;
  return answered;
}

/** What is left of `maxWaitMs`, in whole ms (whole ms waited so far taken off). */
function budget(wait: Resolved, startedAt: number): number {
  return Math.max(0, wait.maxWaitMs - Math.floor(performance.now() - startedAt));
}

/** GCRA and the token bucket: one call takes the slot, then the caller sleeps until it comes. */
async function scheduled(
  pipeline: Pipeline,
  identifier: string,
  wait: Resolved,
  startedAt: number,
): Promise<Decided> {
  const { signal } = wait;
  // A slot that came late is replaced once: a replacement that comes late too
  // (a process that keeps stalling) is used, so that a wait always ends.
  let replaced = false;
  for (;;) {
    const left = budget(wait, startedAt);
    const decidedAt = clockNow(pipeline);
    const slot = await unlessAborted(askSlot(pipeline, identifier, wait.cost, wait.parts, left), signal);
    const { decision } = slot;
    if (!decision.allowed) {
      // A failure policy's denial, and an operator's that ends within reach, are asked again after
      // their retryAfterMs, as the windows' denials are; any other refusal is final.
      const passes = isStoreFailure(decision.reason) || decision.reason === 'denied';
      if (!passes || decision.retryAfterMs > left) return { decision, decidedAt };
      await sleep(decision.retryAfterMs, signal);
      continue;
    }
    const dueAt = performance.now() + decision.waitMs;
    try {
      await sleep(decision.waitMs, signal);
    } catch (reason) {
      await slot.giveBack();
      throw reason;
    }
    if (!replaced && isLateSlot(pipeline.policy, wait.cost, dueAt, performance.now())) {
      // The process stalled past the slot: used now, it would go together with the slots after it.
      replaced = true;
      continue;
    }
    return { decision, decidedAt };
  }
}

/** The windows and the log: `limit` again after each denial's retryAfterMs, with jitter, within `maxWaitMs`. */
async function polled(
  pipeline: Pipeline,
  identifier: string,
  wait: Resolved,
  startedAt: number,
): Promise<Decided> {
  for (;;) {
    const hold: { call: Call | undefined } = { call: undefined };
    const decided = pipeline.call('limit', identifier, wait.cost, wait.parts, { hold });
    const decidedAt = hold.call?.now ?? performance.now();
    const asked = decided.then((decision) => new Slot(pipeline, hold.call as Call, decision));
    const { decision } = await unlessAborted(asked, wait.signal);
    if (decision.allowed) return { decision, decidedAt };
    const left = budget(wait, startedAt);
    if (decision.retryAfterMs > left) return { decision, decidedAt };
    const jitter = Math.random() * JITTER * Math.max(1, decision.retryAfterMs);
    await sleep(Math.min(left, decision.retryAfterMs + jitter), wait.signal);
  }
}

/**
 * The slot being asked for, unless the signal aborts first: then the promise rejects with its
 * reason at once, and the slot, when it comes, is given back.
 */
function unlessAborted(asked: Promise<Slot>, signal: AbortSignal | undefined): Promise<Slot> {
  if (signal === undefined) return asked;
  return new Promise<Slot>((resolve, reject) => {
    function aborted(): void {
      reject(signal?.reason);
      asked.then(
        (slot) => slot.giveBack(),
        () => undefined,
      );
    }
    signal.addEventListener('abort', aborted, { once: true });
    asked.then(
      (slot) => {
        signal.removeEventListener('abort', aborted);
        resolve(slot);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', aborted);
        reject(error);
      },
    );
  });
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted === true) return Promise.reject(signal.reason);
  if (ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', aborted);
      resolve();
    }, ms);
    function aborted(): void {
      clearTimeout(timer);
      reject((signal as AbortSignal).reason);
    }
    signal?.addEventListener('abort', aborted, { once: true });
  });
}
