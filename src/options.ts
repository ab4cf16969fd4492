// Limiter options: their types, their defaults, and the one path that validates and resolves them.
import { invalidOption } from './errors.js';
import type { Policy, Store } from './types.js';
import { keyPart, knownKeys, optionsObject } from './validate.js';

/** Options of {@link createLimiter}. */
export interface LimiterOptions {
  /** Where state lives: a `RedisStore` or a `MemoryStore`. */
  readonly store: Store;
  /** The algorithm and its parameters, e.g. `tokenBucket({ capacity: 100, refillPerSecond: 10 })`. */
  readonly policy: Policy;
  /** Part of every key, so several limiters can share one store. Printable ASCII, no braces. */
  readonly name: string;
  /**
   * Milliseconds since the epoch. By default the store's clock decides: Redis's `TIME` inside the
   * script, so application servers that disagree about the time cannot disagree about limits.
   * Give a clock to replay timelines in tests.
   */
  readonly clock?: () => number;
}

/** The resolved, validated configuration the limiter runs on. */
export interface ResolvedLimiterOptions {
  readonly store: Store;
  readonly policy: Policy;
  readonly name: string;
  readonly clock: (() => number) | undefined;
}

const KNOWN = ['store', 'policy', 'name', 'clock'] as const;

function isStore(value: unknown): value is Store {
  const store = value as Partial<Store> | null;
  return (
    typeof store === 'object' &&
    store !== null &&
    typeof store.decide === 'function' &&
    typeof store.reset === 'function' &&
    typeof store.keyFor === 'function'
  );
}

function isPolicy(value: unknown): value is Policy {
  const policy = value as Partial<Policy> | null;
  return (
    typeof policy === 'object' &&
    policy !== null &&
    typeof policy.decide === 'function' &&
    Array.isArray(policy.args)
  );
}

/** Validates limiter options and applies defaults; throws a SluiceError naming the first bad option. */
export function resolveLimiterOptions(options: LimiterOptions): ResolvedLimiterOptions {
  const raw = optionsObject('createLimiter options', options, true);
  knownKeys('createLimiter', raw, KNOWN);
  if (!isStore(raw.store)) throw invalidOption('store', 'a RedisStore or MemoryStore', raw.store);
  if (!isPolicy(raw.policy)) {
    throw invalidOption('policy', 'a policy such as tokenBucket({ capacity, refillPerSecond })', raw.policy);
  }
  const name = keyPart('name', raw.name);
  if (raw.clock !== undefined && typeof raw.clock !== 'function') {
    throw invalidOption('clock', 'a function returning milliseconds', raw.clock);
  }
  return Object.freeze({
    store: raw.store,
    policy: raw.policy,
    name,
    clock: raw.clock as (() => number) | undefined,
  });
}
