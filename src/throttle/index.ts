// `sluice/throttle`: calls to a rate-limited upstream, paced across every process by slots taken from the store.
import {
  checkIdentifier,
  checkMaxWaitMs,
  limiterPipeline,
  type Pipeline,
  WAIT_DEFAULTS,
} from '../core/index.js';
import { invalidOption } from '../errors.js';
import type { Limiter } from '../types.js';
import { knownKeys, optionsObject } from '../validate.js';
import { ThrottledCall } from './call.js';
import { Lane } from './lane.js';
import { Concurrency } from './lease.js';

export {
  type Answer,
  answerOf,
  pauseOf,
  retryAfterMs,
  UNSAID_PAUSE_MS,
  type UpstreamPause,
} from './upstream.js';

/** The defaults of {@link throttle}'s options. */
export const THROTTLE_DEFAULTS = { key: 'default', maxWaitMs: WAIT_DEFAULTS.maxWaitMs, retries: 2 } as const;

/** Options of {@link throttle}. */
export interface ThrottleOptions {
  /**
   * The pace, shared by every process whose limiter has the same name and store: a limiter of
   * `gcra` or `tokenBucket` made by `createLimiter()`, whose slots can be taken ahead. Give it
   * `onStoreError: 'fallback'` to keep pacing (per process) through a store outage.
   */
  readonly limiter: Limiter;
  /**
   * A limiter of `concurrency({ limit, leaseMs })` made by `createLimiter()`: once a call has its
   * rate slot, it also takes a slot of this limiter under the same key (waiting, within what is left
   * of `maxWaitMs`, while all are held), renews it every half `leaseMs` while `fn` runs, and
   * releases it when `fn` returns or throws. With the limiter on Redis, at most `limit` calls per key
   * run at once across every process.
   * @default undefined (no limit on calls running at once)
   */
  readonly concurrency?: Limiter;
  /**
   * The identifier calls are counted under, unless a call names its own (`run(fn, { key })`).
   * @default 'default'
   */
  readonly key?: string;
  /**
   * The longest a call waits for its slot, in ms (from 0 to 3 600 000). A call still waiting then,
   * or whose next slot is further away, rejects with `ERR_SLUICE_MAX_WAIT` and is not made.
   * @default 60000
   */
  readonly maxWaitMs?: number;
  /**
   * How many times a call the upstream refused (429, or 503 with `Retry-After`) is made again, each
   * after the pause the upstream asked for and a new slot. Then (or when no slot for the next try
   * comes within `maxWaitMs`) its answer is returned as it came.
   * @default 2
   */
  readonly retries?: number;
  /**
   * The fetch that `throttle().fetch` calls.
   * @default globalThis.fetch
   */
  readonly fetch?: typeof globalThis.fetch;
}

/** Options of one call of {@link Throttle.run}. */
export interface RunOptions {
  /**
   * The identifier this call is counted under.
   * @default the throttle's `key`
   */
  readonly key?: string;
  /**
   * Among this process's calls waiting on the same key, higher goes first; equal ones in the order
   * they came. Across processes, slots go in the order they were asked of the store.
   * @default 0
   */
  readonly priority?: number;
  /** Aborts the wait: the call rejects with the signal's reason, and is not made. */
  readonly signal?: AbortSignal;
}

/** What {@link throttle} returns. */
export interface Throttle {
  /**
   * Runs `fn` when its slot comes. What `fn` returns or throws is the call's answer; when it is (or
   * carries, as `error.response`) an HTTP answer that refuses the call (429, or 503 with
   * `Retry-After`) or says nothing is left (`RateLimit: ...;r=0;t=30`), the key is paused for every
   * process, and a refused call is made again up to `retries` times.
   */
  run<T>(fn: () => T | PromiseLike<T>, options?: RunOptions): Promise<T>;
  /** `fetch(input, init)` when its slot comes, learning from the answer as `run` does. */
  fetch(input: string | URL | Request, init?: RequestInit): Promise<Response>;
}

interface Resolved {
  readonly pipeline: Pipeline;
  readonly concurrency: Concurrency | undefined;
  readonly key: string;
  readonly maxWaitMs: number;
  readonly retries: number;
  readonly fetch: typeof globalThis.fetch | undefined;
}

function resolveThrottle(options: ThrottleOptions): Resolved {
  const raw = optionsObject('throttle options', options, true);
  knownKeys('throttle', raw, ['limiter', 'concurrency', 'key', 'maxWaitMs', 'retries', 'fetch']);
  const pipeline = limiterPipeline(raw.limiter);
  if (pipeline === undefined || pipeline.policy.schedules !== true) {
    throw invalidOption(
      'limiter',
      'a limiter of gcra or tokenBucket made by createLimiter() (only they hand out future slots)',
      pipeline === undefined ? raw.limiter : pipeline.policy.description,
    );
  }
  const concurrency = raw.concurrency === undefined ? undefined : resolveConcurrency(raw.concurrency);
  const key = raw.key ?? THROTTLE_DEFAULTS.key;
  const invalidKey = checkIdentifier(key, 'key');
  if (invalidKey !== undefined) throw invalidKey;
  const maxWaitMs = checkMaxWaitMs(raw.maxWaitMs);
  const retries = raw.retries ?? THROTTLE_DEFAULTS.retries;
  if (typeof retries !== 'number' || !Number.isSafeInteger(retries) || retries < 0 || retries > 100) {
    throw invalidOption('retries', 'a whole number from 0 to 100', retries);
  }
  if (raw.fetch !== undefined && typeof raw.fetch !== 'function')
    throw invalidOption('fetch', 'a function', raw.fetch);
  return {
    pipeline,
    concurrency,
    key: key as string,
    maxWaitMs,
    retries,
    fetch: raw.fetch as typeof globalThis.fetch | undefined,
  };
}

/** The `concurrency` option, checked: a limiter of a concurrency policy, whose leases the calls hold. */
function resolveConcurrency(value: unknown): Concurrency {
  const pipeline = limiterPipeline(value);
  const leaseMs = pipeline?.policy.leaseMs;
  if (pipeline === undefined || leaseMs === undefined) {
    throw invalidOption(
      'concurrency',
      'a limiter of concurrency({ limit, leaseMs }) made by createLimiter()',
      pipeline === undefined ? value : pipeline.policy.description,
    );
  }
  return new Concurrency(value as Limiter, pipeline, leaseMs);
}

/**
 * Calls a rate-limited upstream (OpenAI, Stripe, GitHub, a partner's API) from a fleet of processes
 * at the pace its limiter allows: each call waits for a slot taken from the store (GCRA or the token
 * bucket: one store call per call, slots in the order the store was asked, across every process),
 * and an upstream that answers 429 with `Retry-After` pauses the key for every process. With
 * `concurrency`, a call also holds a lease on one of that limiter's slots while it runs, so that at
 * most its `limit` calls per key run at once; the lease is released when the call returns or throws.
 *
 * @example
 * const limiter = createLimiter({ store, policy: gcra({ limit: 175, periodMs: 1000, burst: 1 }), name: 'partner' });
 * const inFlight = createLimiter({ store, policy: concurrency({ limit: 10, leaseMs: 30_000 }), name: 'partner-in-flight' });
 * const partner = throttle({ limiter, concurrency: inFlight });
 * const response = await partner.fetch('https://partner.example/v1/orders');
 */
export function throttle(options: ThrottleOptions): Throttle {
  const settings = resolveThrottle(options);
  const { pipeline, concurrency, maxWaitMs } = settings;
  const shared = { pipeline, concurrency, maxWaitMs };
  const lanes = new Map<string, Lane>();
  const laneFor = (key: string): Lane => {
    let lane = lanes.get(key);
    if (lane === undefined) {
      const made = new Lane({
        pipeline,
        key,
        maxWaitMs,
        idle: () => {
          if (lanes.get(key) === made) lanes.delete(key);
        },
      });
      lanes.set(key, made);
      lane = made;
    }
    return lane;
  };
  function run<T>(
    fn: () => T | PromiseLike<T>,
    runOptions?: RunOptions,
    retries = settings.retries,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const { key, priority, signal } = resolveRun(runOptions, settings.key);
      signal?.throwIfAborted();
      const lane = laneFor(key);
      const call = new ThrottledCall<T>(
        { ...shared, lane, key, retries, priority, signal },
        fn,
        resolve,
        reject,
      );
      call.queue(false);
    });
  }
  return {
    run: (fn, runOptions) => run(fn, runOptions),
    fetch: (input, init) => {
      const request = input instanceof Request ? input : undefined;
      const fetcher = settings.fetch ?? globalThis.fetch;
      // A body that is a stream can be sent once: such a call is not made again.
      const once = init?.body instanceof ReadableStream;
      const signal = init?.signal ?? request?.signal ?? undefined;
      return run(
        () => fetcher(request === undefined ? input : request.clone(), init),
        signal === undefined ? undefined : { signal },
        once ? 0 : settings.retries,
      );
    },
  };
}

function resolveRun(
  options: RunOptions | undefined,
  defaultKey: string,
): { key: string; priority: number; signal: AbortSignal | undefined } {
  const raw = optionsObject('run options', options, false);
  knownKeys('run', raw, ['key', 'priority', 'signal']);
  const key = raw.key ?? defaultKey;
  const invalid = checkIdentifier(key, 'key');
  if (invalid !== undefined) throw invalid;
  const priority = raw.priority ?? 0;
  if (typeof priority !== 'number' || !Number.isFinite(priority)) {
    throw invalidOption('priority', 'a finite number', priority);
  }
  return { key: key as string, priority, signal: raw.signal as AbortSignal | undefined };
}
