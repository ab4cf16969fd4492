// Store health per shard, and what the limiter decides while a shard fails: the failure policy.
import type { SluiceError } from '../errors.js';
import type { Decision, StoreFailure, StoreRequest } from '../types.js';
import type { Fallback } from './fallback.js';

/** `allow` fails open, `deny` fails closed, `fallback` decides in process with the same policy. */
export type FailureMode = 'allow' | 'deny' | 'fallback';

/**
 * What a fail-closed decision tells the client to wait, in ms: long enough not to invite a storm of
 * retries, short enough to come back soon after the store does (and one whole `Retry-After` second).
 */
export const DENY_RETRY_AFTER_MS = 1000;

/** The key of a store that is one shard. */
const WHOLE_STORE = '';

/** One shard known to be failing. */
interface Outage {
  reason: StoreFailure;
  error: SluiceError | undefined;
  /** A call is out to the shard as the probe: the others are answered by the failure policy. */
  probing: boolean;
  /** Health.begun when it began: answers to calls sent before then say nothing of the store now. */
  readonly since: number;
}

/**
 * Store health per shard (a cluster primary; the whole store when it is one shard). While a shard
 * fails, its calls are answered at once by the failure mode, except one at a time that goes to the
 * store as a probe; the first answer within `timeoutMs` makes the shard healthy again. So an outage
 * costs each request microseconds rather than `timeoutMs`, a client that queues commands while
 * disconnected gets one at a time, and a primary that is down leaves the others' calls to Redis.
 */
export class Health {
  readonly mode: FailureMode;
  /** Shards known to be failing. Empty while all is well, which the hot path checks first. */
  readonly #outages = new Map<string, Outage>();
  /** Where `fallback` decides; cleared when every shard is back. */
  readonly #fallback: Fallback;
  readonly #changed: (up: boolean, shard: string | undefined) => void;

  /** `changed` hears each shard going down and coming back. */
  constructor(
    mode: FailureMode,
    fallback: Fallback,
    changed: (up: boolean, shard: string | undefined) => void,
  ) {
    this.mode = mode;
    this.#fallback = fallback;
    this.#changed = changed;
  }

  /**
   * How many outages have begun: a call notes it when it is sent (Call.outagesSeen). A field, not a
   * getter: it is read on every call's way to the store. Written by this class alone.
   */
  begun = 0;

  /** Whether some shard is failing. */
  get down(): boolean {
    return this.#outages.size > 0;
  }

  /**
   * Whether a call for `shard` may go to the store: always while the shard is healthy; while it
   * fails, only when no probe is out. `'probe'`: this call is the probe and must end with
   * `answered` or `failed`.
   */
  admit(shard: string | undefined): 'store' | 'probe' | 'skip' {
    const outage = this.#outages.get(shard ?? WHOLE_STORE);
    if (outage === undefined) return 'store';
    if (outage.probing) return 'skip';
    outage.probing = true;
    return 'probe';
  }

  /** The failure that made the shard unhealthy, and its kind; for calls answered without asking. */
  outage(shard: string | undefined): {
    readonly reason: StoreFailure;
    readonly error: SluiceError | undefined;
  } {
    return this.#outages.get(shard ?? WHOLE_STORE) ?? { reason: 'store-error', error: undefined };
  }

  /**
   * The shard answered in time a call sent when `seen` outages had begun (a probe or not). An
   * answer to a call sent before the shard's outage began (a reply already on its way when another
   * call failed) does not end it: the outage would end and begin again, and with it the fallback
   * store's count, granting a second allowance within one outage.
   */
  answered(shard: string | undefined, seen: number): void {
    if (this.#outages.size === 0) return;
    const key = shard ?? WHOLE_STORE;
    const outage = this.#outages.get(key);
    if (outage === undefined || seen < outage.since) return;
    this.#outages.delete(key);
    this.#changed(true, shard);
    // The next outage starts from a full allowance rather than from what this one left behind.
    if (this.#outages.size === 0) this.#fallback.clear();
  }

  /** The shard failed or ran out of time. A probe's failure lets the next call probe. */
  failed(
    shard: string | undefined,
    reason: StoreFailure,
    error: SluiceError | undefined,
    probe: boolean,
  ): void {
    const key = shard ?? WHOLE_STORE;
    const outage = this.#outages.get(key);
    if (outage !== undefined) {
      outage.reason = reason;
      outage.error = error;
      if (probe) outage.probing = false;
      return;
    }
    this.begun++;
    this.#outages.set(key, { reason, error, probing: false, since: this.begun });
    this.#changed(false, shard);
  }

  /** A probe that was admitted but not sent (its group was answered without the store): the next call may probe. */
  release(shard: string | undefined): void {
    const outage = this.#outages.get(shard ?? WHOLE_STORE);
    if (outage !== undefined) outage.probing = false;
  }

  /** A decision made without the store, by the failure mode. `request.policy` may be a per-call variant. */
  decide(request: StoreRequest, reason: StoreFailure): Decision {
    const limit = request.policy.limit;
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
    return this.#fallback.decide(request);
  }
}
