// createLimiter(): validates each call, asks the store within a deadline, falls back when it fails, and
// shapes the decision. Knows no Redis, no HTTP.
import { performance } from 'node:perf_hooks';
import { Deadlines } from './deadlines.js';
import { DenyCache } from './deny-cache.js';
import { describeValue, ERROR_CODES, SluiceError } from './errors.js';
import { Failover } from './failure.js';
import { callHook, type HookContext } from './hooks.js';
import { type LimiterOptions, resolveLimiterOptions } from './options.js';
import type { Decision, Operation, Policy, Store, StoreRequest, StoreResult } from './types.js';

/** Options of one call. */
export interface CallOptions {
  /**
   * Units this request takes (or, for `peek`, would take).
   * @default 1
   */
  readonly cost?: number;
  /**
   * A hash tag shared with other keys: the key becomes `<prefix>:<name>:{<tag>}:<identifier>`, so
   * limiters whose calls name the same tag keep their keys in one cluster slot and `all()` can
   * decide them in one script (the seed's `rl:{tenant:9}:user:42` and `rl:{tenant:9}:total`). The
   * tag is part of the key: calls with and without it count separately, so give it on every call
   * for that identifier. Choose one per entity (a tenant), never a constant: a constant tag would
   * put every identifier on one shard.
   * @default undefined (the identifier is its own tag)
   */
  readonly tag?: string;
}

/** Options of `reset` (and `refund`'s third argument). */
export interface KeyOptions {
  /** The tag the calls were made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
}

/** A rate limiter bound to one store, one policy and one name. */
export interface Limiter {
  readonly name: string;
  readonly policy: Policy;
  readonly store: Store;
  /** Takes `cost` units if they are available; a denied request takes nothing. */
  limit(identifier: string, options?: CallOptions): Promise<Decision>;
  /** The decision `limit` would give, consuming nothing. `remaining` is what is left now. */
  peek(identifier: string, options?: CallOptions): Promise<Decision>;
  /** Gives back `amount` units (at most what is in use), e.g. for a request that turned out free. */
  refund(identifier: string, amount?: number, options?: KeyOptions): Promise<Decision>;
  /** Forgets the identifier: its next request starts with a full allowance. */
  reset(identifier: string, options?: KeyOptions): Promise<void>;
}

const MAX_IDENTIFIER_BYTES = 1024;

/** Whether a value has the shape of a limiter (what all() and the HTTP middleware accept). */
export function isLimiter(value: unknown): value is Limiter {
  const limiter = value as Partial<Limiter> | null;
  return (
    typeof limiter === 'object' &&
    limiter !== null &&
    typeof limiter.limit === 'function' &&
    typeof limiter.peek === 'function' &&
    typeof limiter.refund === 'function' &&
    typeof limiter.reset === 'function' &&
    typeof limiter.name === 'string' &&
    typeof limiter.store === 'object' &&
    typeof limiter.policy?.windowMs === 'number'
  );
}

/** Checks an identifier; `option` names it in the message. */
export function checkIdentifier(identifier: unknown, option = 'identifier'): SluiceError | undefined {
  if (typeof identifier !== 'string' || identifier.length === 0) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`${option}\` to be a non-empty string, got ${describeValue(identifier)}.`,
    );
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit: only long strings need measuring.
  if (identifier.length * 3 > MAX_IDENTIFIER_BYTES && Buffer.byteLength(identifier) > MAX_IDENTIFIER_BYTES) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`${option}\` to be at most ${MAX_IDENTIFIER_BYTES} bytes of UTF-8, got ${Buffer.byteLength(identifier)} bytes.`,
    );
  }
  return undefined;
}

/** Checks a cost or refund amount against what the policy can grant. */
export function checkCost(option: string, cost: unknown, policy: Policy): SluiceError | undefined {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    return new SluiceError(
      ERROR_CODES.INVALID_COST,
      `Expected \`${option}\` to be a positive integer, got ${describeValue(cost)}.`,
    );
  }
  if (cost > policy.maxCost) {
    return new SluiceError(
      ERROR_CODES.COST_EXCEEDS_LIMIT,
      `Expected \`${option}\` to be at most ${policy.maxCost}, the most ${policy.description} can ever grant, got ${cost} (number).`,
    );
  }
  return undefined;
}

/** Checks a call's tag: absent, or a valid identifier (escaped into the key the same way). */
export function checkTag(tag: unknown): SluiceError | undefined {
  return tag === undefined ? undefined : checkIdentifier(tag, 'tag');
}

/** Reads a limiter's clock, validated: milliseconds, `undefined` for the store's clock, or the error. */
export function readClock(clock: (() => number) | undefined): number | SluiceError | undefined {
  if (clock === undefined) return undefined;
  const value = clock();
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    return new SluiceError(
      ERROR_CODES.INVALID_CLOCK,
      `Expected \`clock\` to return a finite number of milliseconds of at least 0, got ${describeValue(value)}.`,
    );
  }
  return value;
}

/**
 * What all() needs of a limiter beyond its public face, so that an atomic check over several
 * limiters keeps each one's clock, deadline, failure policy, deny cache and hooks.
 */
export interface LimiterInternals {
  /** The limiter's clock (`undefined`: the store's). One atomic script runs at one time. */
  readonly clock: (() => number) | undefined;
  /** The limiter's deadlines: an atomic check waits no longer than its first limiter would. */
  readonly deadlines: Deadlines;
  /** Whether a call may go to the store now (see Failover.admit). */
  admit(): 'store' | 'probe' | 'skip';
  /** Marks the start of a call: what the deny cache needs to remember its denial. */
  begin(request: StoreRequest): { readonly startedAt: number; readonly epoch: number };
  /** The decision for the store's answer. */
  answered(
    request: StoreRequest,
    result: StoreResult,
    probe: boolean,
    start: { startedAt: number; epoch: number },
  ): Decision;
  /** The failure policy's decision, reported to `onError`; `error` undefined while another call probes. */
  unanswered(
    request: StoreRequest,
    reason: 'store-error' | 'timeout' | 'skipped',
    error: unknown,
    probe: boolean,
  ): Decision;
}

const INTERNALS = new WeakMap<Limiter, LimiterInternals>();

/** The internals of a limiter made by `createLimiter`, or `undefined` for any other object. */
export function internalsOf(limiter: Limiter): LimiterInternals | undefined {
  return INTERNALS.get(limiter);
}

/**
 * Creates a limiter. Bad configuration throws a SluiceError here; bad calls reject with one and
 * write nothing. A store that fails or is late never makes a call reject: `onStoreError` decides.
 *
 * @example
 * const limiter = createLimiter({
 *   store: new RedisStore({ client: new Redis({ enableOfflineQueue: false, maxRetriesPerRequest: 0 }) }),
 *   policy: tokenBucket({ capacity: 100, refillPerSecond: 10 }),
 *   name: 'api',
 *   onStoreError: 'fallback',
 *   denyCache: true,
 * });
 * const decision = await limiter.limit('client-42');
 * if (!decision.allowed) reply(429, { 'Retry-After': Math.ceil(decision.retryAfterMs / 1000) });
 */
export function createLimiter(options: LimiterOptions): Limiter {
  const resolved = resolveLimiterOptions(options);
  const { store, policy, name, clock, timeoutMs, onDecision, onError, enforce } = resolved;
  const limit = policy.limit;
  const failover = new Failover(resolved.onStoreError, policy);
  const deadlines = new Deadlines(timeoutMs);
  const denyCache =
    resolved.denyCacheMaxEntries > 0 ? new DenyCache(resolved.denyCacheMaxEntries) : undefined;
  // A store that decides in process needs neither a deadline nor a promise of its own.
  const decideNow = typeof store.decideNow === 'function' ? store.decideNow.bind(store) : undefined;

  const now = (): number | SluiceError | undefined => readClock(clock);

  function context(
    identifier: string,
    operation: Operation | 'reset',
    cost: number,
    error: SluiceError | undefined,
  ): HookContext {
    const source =
      error === undefined ? 'store' : error.code === ERROR_CODES.TIMEOUT ? 'timeout' : 'store-error';
    return error === undefined
      ? { name, identifier, operation, cost, source, storeMs: 0, enforced: enforce }
      : { name, identifier, operation, cost, error, source, storeMs: 0, enforced: enforce };
  }

  /** Reports the real decision to the hook, and gives the caller the enforced one. */
  function deliver(decision: Decision, request: StoreRequest, error: SluiceError | undefined): Decision {
    if (onDecision !== undefined) {
      callHook(
        'onDecision',
        onDecision,
        decision,
        context(request.identifier, request.operation, request.cost, error),
      );
    }
    if (enforce) return decision;
    const shadowed = {
      allowed: true,
      limit,
      remaining: decision.remaining,
      resetMs: decision.resetMs,
      retryAfterMs: 0,
      wouldAllow: decision.allowed,
    };
    return decision.reason === undefined ? shadowed : { ...shadowed, reason: decision.reason };
  }

  function fromStore(request: StoreRequest, result: StoreResult, startedAt: number, epoch: number): Decision {
    failover.succeeded();
    if (denyCache !== undefined && !result.allowed && request.operation !== 'refund') {
      denyCache.remember(request.identifier, request.tag, request.cost, result, startedAt, epoch);
    }
    const decision: Decision = {
      allowed: result.allowed,
      limit,
      remaining: result.remaining,
      resetMs: result.resetMs,
      retryAfterMs: result.retryAfterMs,
    };
    return deliver(decision, request, undefined);
  }

  function storeError(error: unknown): SluiceError {
    if (error instanceof SluiceError) return error;
    const message = error instanceof Error ? error.message : String(error);
    return new SluiceError(ERROR_CODES.STORE, `The ${store.kind} store failed: ${message}`, { cause: error });
  }

  function timeoutError(): SluiceError {
    return new SluiceError(
      ERROR_CODES.TIMEOUT,
      `The ${store.kind} store did not answer within \`timeoutMs\` (${timeoutMs} ms).`,
    );
  }

  function failed(request: StoreRequest, reason: 'store-error' | 'timeout', error: SluiceError): Decision {
    failover.failed(reason, error);
    if (onError !== undefined) {
      callHook(
        'onError',
        onError,
        error,
        context(request.identifier, request.operation, request.cost, undefined),
      );
    }
    return deliver(failover.decide(request, reason), request, error);
  }

  /** Asks the store, settling with the first of its answer and the deadline; a late answer is dropped. */
  function ask(request: StoreRequest, probe: boolean, startedAt: number, epoch: number): Promise<Decision> {
    return new Promise<Decision>((resolve) => {
      deadlines.race(
        () => store.decide(request),
        (result) => {
          if (probe) failover.probeDone();
          resolve(fromStore(request, result, startedAt, epoch));
        },
        (error) => {
          if (probe) failover.probeDone();
          resolve(failed(request, 'store-error', storeError(error)));
        },
        () => {
          if (probe) failover.probeDone();
          resolve(failed(request, 'timeout', timeoutError()));
        },
      );
    });
  }

  function run(
    operation: Operation,
    identifier: string,
    cost: number,
    costOption: string,
    tag: string | undefined,
  ): Promise<Decision> {
    const invalid = checkIdentifier(identifier) ?? checkCost(costOption, cost, policy) ?? checkTag(tag);
    if (invalid !== undefined) return Promise.reject(invalid);
    const time = now();
    if (time instanceof SluiceError) return Promise.reject(time);
    const request: StoreRequest = { policy, name, identifier, tag, operation, cost, now: time };
    let startedAt = 0;
    let epoch = 0;
    if (denyCache !== undefined) {
      startedAt = time ?? performance.now();
      if (operation === 'refund') denyCache.forget(identifier, tag);
      else {
        const hit = denyCache.lookup(identifier, tag, cost, startedAt);
        if (hit !== undefined) {
          const cached: Decision = { allowed: false, limit, ...hit, reason: 'cached' };
          return Promise.resolve(deliver(cached, request, undefined));
        }
      }
      epoch = denyCache.epoch;
    }
    if (decideNow !== undefined) {
      let result: StoreResult;
      try {
        result = decideNow(request);
      } catch (error) {
        return Promise.resolve(failed(request, 'store-error', storeError(error)));
      }
      return Promise.resolve(fromStore(request, result, startedAt, epoch));
    }
    const admitted = failover.admit();
    if (admitted === 'skip')
      return Promise.resolve(deliver(failover.decide(request), request, failover.error));
    return ask(request, admitted === 'probe', startedAt, epoch);
  }

  function reset(identifier: string, options?: KeyOptions): Promise<void> {
    const tag = options?.tag;
    const invalid = checkIdentifier(identifier) ?? checkTag(tag);
    if (invalid !== undefined) return Promise.reject(invalid);
    denyCache?.forget(identifier, tag);
    failover.forget(name, identifier, tag);
    return new Promise<void>((resolve, reject) => {
      const fail = (error: SluiceError): void => {
        if (onError !== undefined) {
          callHook('onError', onError, error, context(identifier, 'reset', 0, undefined));
        }
        reject(error);
      };
      deadlines.race(
        () => (tag === undefined ? store.reset(name, identifier) : store.reset(name, identifier, tag)),
        resolve,
        (error) => fail(storeError(error)),
        () => fail(timeoutError()),
      );
    });
  }

  const limiter: Limiter = {
    name,
    policy,
    store,
    limit: (identifier, options) => run('limit', identifier, options?.cost ?? 1, 'cost', options?.tag),
    peek: (identifier, options) => run('peek', identifier, options?.cost ?? 1, 'cost', options?.tag),
    refund: (identifier, amount = 1, options) => run('refund', identifier, amount, 'amount', options?.tag),
    reset,
  };
  INTERNALS.set(limiter, {
    clock,
    deadlines,
    admit: () => failover.admit(),
    begin: (request) => ({
      startedAt: denyCache === undefined ? 0 : (request.now ?? performance.now()),
      epoch: denyCache?.epoch ?? 0,
    }),
    answered: (request, result, probe, start) => {
      if (probe) failover.probeDone();
      return fromStore(request, result, start.startedAt, start.epoch);
    },
    unanswered: (request, reason, error, probe) => {
      if (probe) failover.probeDone();
      if (reason === 'skipped') return deliver(failover.decide(request), request, failover.error);
      return failed(request, reason, reason === 'timeout' ? timeoutError() : storeError(error));
    },
  });
  return limiter;
}
