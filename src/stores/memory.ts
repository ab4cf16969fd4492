// The in-process store: runs each policy's pure twin over a bounded LRU map. No timer per key.
import { stateKey } from '../keys.js';
import type { Store, StoreRequest, StoreResult } from '../types.js';
import { keyPart, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { atomicRequestsError } from './atomic.js';

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * The most identifiers kept at once (per store, across limiters). Beyond it, the least recently
   * used identifier is forgotten, which resets its allowance: size it above your active clients.
   * @default 100000
   */
  readonly maxKeys?: number;
  /**
   * Milliseconds between sweeps of expired state. One `unref`'d timer per store.
   * @default 60000
   */
  readonly sweepIntervalMs?: number;
  /**
   * The clock, in ms. Limiters given their own `clock` pass its time instead.
   * @default Date.now
   */
  readonly clock?: () => number;
  /**
   * First part of every key, as in RedisStore.
   * @default 'rl'
   */
  readonly prefix?: string;
}

interface Entry {
  state: unknown;
  expiresAt: number;
}

const DEFAULTS = { maxKeys: 100_000, sweepIntervalMs: 60_000, prefix: 'rl' } as const;

/**
 * Keeps state in this process, with the same semantics as the Redis scripts. Each process enforces
 * its own limits: use it for one-process services, tests, and as the fallback when Redis is down.
 *
 * @example
 * const limiter = createLimiter({ store: new MemoryStore(), policy: gcra({ limit: 10, periodMs: 1000 }), name: 'api' });
 */
export class MemoryStore implements Store {
  readonly kind = 'memory';
  readonly maxKeys: number;
  readonly prefix: string;
  readonly #clock: () => number;
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  readonly #entries = new Map<string, Entry>();
  #sweeper: NodeJS.Timeout | undefined;
  // The sweep judges expiry in the requests' time, which a limiter's own clock may set apart from ours.
  #lastNow = 0;
  #lastClock = 0;

  constructor(options?: MemoryStoreOptions) {
    const raw = optionsObject('MemoryStore options', options, false);
    knownKeys('MemoryStore', raw, ['maxKeys', 'sweepIntervalMs', 'clock', 'prefix']);
    this.maxKeys =
      raw.maxKeys === undefined ? DEFAULTS.maxKeys : positiveInteger('MemoryStore.maxKeys', raw.maxKeys);
    this.prefix = raw.prefix === undefined ? DEFAULTS.prefix : keyPart('MemoryStore.prefix', raw.prefix);
    const sweepIntervalMs =
      raw.sweepIntervalMs === undefined
        ? DEFAULTS.sweepIntervalMs
        : positiveInteger('MemoryStore.sweepIntervalMs', raw.sweepIntervalMs, 2 ** 31 - 1);
    if (raw.clock !== undefined && typeof raw.clock !== 'function') {
      throw new TypeError('Expected `MemoryStore.clock` to be a function returning milliseconds.');
    }
    this.#clock = (raw.clock as (() => number) | undefined) ?? Date.now;
    this.#sweeper = setInterval(() => this.sweep(), sweepIntervalMs);
    this.#sweeper.unref();
  }

  /** The number of identifiers currently held (expired ones count until swept or touched). */
  get size(): number {
    return this.#entries.size;
  }

  keyFor(name: string, identifier: string, tag?: string): string {
    return stateKey(this.prefix, name, identifier, tag);
  }

  decide(request: StoreRequest): Promise<StoreResult> {
    return Promise.resolve(this.decideNow(request));
  }

  /** Decides synchronously; what `decide` resolves to. */
  decideNow(request: StoreRequest): StoreResult {
    const now = this.#now(request.now);
    return this.#decideAt(request, stateKey(this.prefix, request.name, request.identifier, request.tag), now);
  }

  decideAll(requests: readonly StoreRequest[]): Promise<StoreResult[]> {
    try {
      return Promise.resolve(this.decideAllNow(requests));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Decides several requests together, synchronously, as the Redis store's combined script does:
   * every key is looked at first, and `limit` takes from each only when all allow. Throws
   * ERR_SLUICE_CROSS_SLOT for keys that could not share a script on Redis Cluster, so that code
   * tested on this store behaves the same on Redis.
   */
  decideAllNow(requests: readonly StoreRequest[]): StoreResult[] {
    const keys = requests.map((r) => stateKey(this.prefix, r.name, r.identifier, r.tag));
    const invalid = atomicRequestsError(requests, keys);
    if (invalid !== undefined) throw invalid;
    const first = requests[0];
    if (first === undefined) return [];
    const now = this.#now(first.now);
    const looked = requests.map((r, i) =>
      this.#decideAt({ ...r, operation: 'peek' }, keys[i] as string, now),
    );
    if (first.operation !== 'limit' || looked.some((result) => !result.allowed)) return looked;
    return requests.map((r, i) => this.#decideAt(r, keys[i] as string, now));
  }

  #now(given: number | undefined): number {
    let now: number;
    if (given === undefined) {
      now = this.#clock();
      this.#lastClock = now;
    } else {
      now = given;
      this.#lastClock = this.#clock();
    }
    this.#lastNow = now;
    return now;
  }

  #decideAt(request: StoreRequest, key: string, now: number): StoreResult {
    const entries = this.#entries;
    let entry = entries.get(key);
    if (entry !== undefined) {
      entries.delete(key);
      if (entry.expiresAt <= now) entry = undefined;
    }
    const outcome = request.policy.decide(entry?.state, now, request.operation, request.cost);
    if (outcome.ttlMs > 0 && outcome.state !== undefined) {
      if (entry === undefined) entry = { state: outcome.state, expiresAt: now + outcome.ttlMs };
      else {
        entry.state = outcome.state;
        entry.expiresAt = now + outcome.ttlMs;
      }
    } else if (outcome.ttlMs === 0) {
      entry = undefined;
    }
    if (entry !== undefined) {
      entries.set(key, entry);
      if (entries.size > this.maxKeys) this.#evictOldest();
    }
    return outcome;
  }

  reset(name: string, identifier: string, tag?: string): Promise<void> {
    this.#entries.delete(stateKey(this.prefix, name, identifier, tag));
    return Promise.resolve();
  }

  /** Drops expired state now; runs on its own every `sweepIntervalMs`. Returns how many were dropped. */
  sweep(): number {
    const now = this.#lastNow + (this.#clock() - this.#lastClock);
    let dropped = 0;
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAt <= now) {
        this.#entries.delete(key);
        dropped++;
      }
    }
    return dropped;
  }

  /** Forgets every identifier. */
  clear(): void {
    this.#entries.clear();
  }

  /** Stops the sweep timer. The store still works; expired state is then dropped only when touched. */
  close(): void {
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  #evictOldest(): void {
    const oldest = this.#entries.keys().next();
    if (oldest.done !== true) this.#entries.delete(oldest.value);
  }
}
