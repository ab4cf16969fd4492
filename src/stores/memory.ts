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

/** One identifier's state under one limiter name (and tag), linked into the store-wide recency list. */
interface Entry {
  state: unknown;
  expiresAt: number;
  /** The next entry toward eviction (used less recently), and the next one toward the newest. */
  older: Entry | undefined;
  newer: Entry | undefined;
  readonly identifier: string;
  /** The table that holds it, one per limiter name and tag. */
  readonly table: Map<string, Entry>;
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
  // One table per limiter name (and tag), keyed by the identifier as given: no key string to build
  // and hash per decision. Recency is a doubly linked list across every table, so a use moves an
  // entry by relinking it (Map delete-and-set, the other way to keep LRU order, costs more than the
  // decision itself).
  readonly #tables = new Map<string, Map<string, Entry>>();
  #size = 0;
  #oldest: Entry | undefined;
  #newest: Entry | undefined;
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
    return this.#size;
  }

  keyFor(name: string, identifier: string, tag?: string): string {
    return stateKey(this.prefix, name, identifier, tag);
  }

  decide(request: StoreRequest): Promise<StoreResult> {
    return Promise.resolve(this.decideNow(request));
  }

  /** Decides synchronously; what `decide` resolves to. */
  decideNow(request: StoreRequest): StoreResult {
    return this.#decideAt(request, this.#now(request.now));
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
    const looked = requests.map((r) => this.#decideAt({ ...r, operation: 'peek' }, now));
    if (first.operation !== 'limit' || looked.some((result) => !result.allowed)) return looked;
    return requests.map((r) => this.#decideAt(r, now));
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

  /** The table of a limiter name and tag. Names have no braces, so `name{tag` never equals a name. */
  #table(name: string, tag: string | undefined): Map<string, Entry> {
    const tableKey = tag === undefined ? name : `${name}{${tag}`;
    let table = this.#tables.get(tableKey);
    if (table === undefined) {
      table = new Map();
      this.#tables.set(tableKey, table);
    }
    return table;
  }

  #decideAt(request: StoreRequest, now: number): StoreResult {
    const identifier = request.identifier;
    const table = this.#table(request.name, request.tag);
    let entry = table.get(identifier);
    if (entry !== undefined && entry.expiresAt <= now) {
      this.#remove(entry);
      entry = undefined;
    }
    const outcome = request.policy.decide(entry?.state, now, request.operation, request.cost);
    if (outcome.ttlMs > 0 && outcome.state !== undefined) {
      if (entry === undefined) {
        entry = {
          state: outcome.state,
          expiresAt: now + outcome.ttlMs,
          older: undefined,
          newer: undefined,
          identifier,
          table,
        };
        table.set(identifier, entry);
        this.#size++;
        this.#link(entry);
        if (this.#size > this.maxKeys && this.#oldest !== undefined) this.#remove(this.#oldest);
        return outcome;
      }
      entry.state = outcome.state;
      entry.expiresAt = now + outcome.ttlMs;
    } else if (outcome.ttlMs === 0) {
      if (entry !== undefined) this.#remove(entry);
      return outcome;
    }
    // Any use, a denial or a peek too, makes the identifier the most recently used.
    if (entry !== undefined && entry !== this.#newest) {
      this.#unlink(entry);
      this.#link(entry);
    }
    return outcome;
  }

  reset(name: string, identifier: string, tag?: string): Promise<void> {
    const entry = this.#tables.get(tag === undefined ? name : `${name}{${tag}`)?.get(identifier);
    if (entry !== undefined) this.#remove(entry);
    return Promise.resolve();
  }

  /** Drops expired state now; runs on its own every `sweepIntervalMs`. Returns how many were dropped. */
  sweep(): number {
    const now = this.#lastNow + (this.#clock() - this.#lastClock);
    let dropped = 0;
    let entry = this.#oldest;
    while (entry !== undefined) {
      const newer = entry.newer;
      if (entry.expiresAt <= now) {
        this.#remove(entry);
        dropped++;
      }
      entry = newer;
    }
    return dropped;
  }

  /** Forgets every identifier. */
  clear(): void {
    this.#tables.clear();
    this.#size = 0;
    this.#oldest = undefined;
    this.#newest = undefined;
  }

  /** Stops the sweep timer. The store still works; expired state is then dropped only when touched. */
  close(): void {
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  /** Links an unlinked entry in as the most recently used. */
  #link(entry: Entry): void {
    entry.older = this.#newest;
    entry.newer = undefined;
    if (this.#newest === undefined) this.#oldest = entry;
    else this.#newest.newer = entry;
    this.#newest = entry;
  }

  #unlink(entry: Entry): void {
    if (entry.older === undefined) this.#oldest = entry.newer;
    else entry.older.newer = entry.newer;
    if (entry.newer === undefined) this.#newest = entry.older;
    else entry.newer.older = entry.older;
    entry.older = undefined;
    entry.newer = undefined;
  }

  #remove(entry: Entry): void {
    this.#unlink(entry);
    entry.table.delete(entry.identifier);
    this.#size--;
  }
}
