// What the limiter decides when its store fails or is late, and when to ask the store again.
import type { SluiceError } from './errors.js';
import { MemoryStore } from './stores/memory.js';
import type { Decision, DecisionReason, Policy, StoreRequest } from './types.js';

/** `allow` fails open, `deny` fails closed, `fallback` decides in process with the same policy. */
export type FailureMode = 'allow' | 'deny' | 'fallback';

/**
 * What a fail-closed decision tells the client to wait, in ms: long enough not to invite a storm of
 * retries, short enough to come back soon after the store does (and one whole `Retry-After` second).
 */
export const DENY_RETRY_AFTER_MS = 1000;

/**
 * Store health and the decisions made without the store. After a failure, calls are answered at
 * once by the failure mode, except one at a time that goes to the store as a probe; the first answer
 * within `timeoutMs` makes the store healthy again. So an outage costs each request microseconds
 * rather than `timeoutMs`, and a client that queues commands while disconnected gets one at a time.
 */
export class Failover {
  readonly mode: FailureMode;
  readonly #policy: Policy;
  #fallback: MemoryStore | undefined;
  #down = false;
  #probing = false;
  #reason: 'store-error' | 'timeout' = 'store-error';
  #error: SluiceError | undefined;

  constructor(mode: FailureMode, policy: Policy) {
    this.mode = mode;
    this.#policy = policy;
  }

  /** Whether the last call to the store failed and no call has succeeded since. */
  get down(): boolean {
    return this.#down;
  }

  /** The failure that made the store unhealthy, for hooks. */
  get error(): SluiceError | undefined {
    return this.#error;
  }

  /**
   * Whether this call may go to the store: always while healthy; while down, only when no probe is
   * out. Returns `'probe'` for the call that becomes the probe, which must call `probeDone()`.
   */
  admit(): 'store' | 'probe' | 'skip' {
    if (!this.#down) return 'store';
    if (this.#probing) return 'skip';
    this.#probing = true;
    return 'probe';
  }

  /** The probe was answered, failed or ran out of time: the next call may probe again. */
  probeDone(): void {
    this.#probing = false;
  }

  /** The store answered in time. */
  succeeded(): void {
    if (!this.#down) return;
    this.#down = false;
    this.#error = undefined;
    // The next outage starts from a full allowance rather than from what this one left behind.
    this.#fallback?.clear();
  }

  /** The store failed or ran out of time. */
  failed(reason: 'store-error' | 'timeout', error: SluiceError): void {
    this.#down = true;
    this.#reason = reason;
    this.#error = error;
  }

  /** Forgets an identifier in the fallback store (on `reset`). */
  forget(name: string, identifier: string, tag: string | undefined): void {
    this.#fallback?.reset(name, identifier, tag);
  }

  /** A decision made without the store, for a store failure of the given kind (the last one by default). */
  decide(request: StoreRequest, reason: 'store-error' | 'timeout' = this.#reason): Decision {
    const limit = this.#policy.limit;
    if (this.mode === 'allow') {
      // Nothing is known about the identifier: report a full allowance.
      return { allowed: true, limit, remaining: limit, resetMs: 0, retryAfterMs: 0, reason };
    }
    if (this.mode === 'deny') {
      return {
        allowed: false,
        limit,
        remaining: 0,
        resetMs: DENY_RETRY_AFTER_MS,
        retryAfterMs: DENY_RETRY_AFTER_MS,
        reason,
      };
    }
    // Created on the first failure: a limiter whose store never fails never holds one.
    this.#fallback ??= new MemoryStore({ prefix: 'fallback' });
    const result = this.#fallback.decideNow(request);
    return {
      allowed: result.allowed,
      limit,
      remaining: result.remaining,
      resetMs: result.resetMs,
      retryAfterMs: result.retryAfterMs,
      reason: 'fallback' satisfies DecisionReason,
    };
  }
}
