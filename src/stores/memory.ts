// The in-process store: runs each policy's pure twin over a bounded LRU map. No timer per key.
import {
  DECIDE_INTO,
  type DecidesInto,
  type OutcomeInto,
  reusableOutcome,
} from '../algorithms/outcome-into.js';
import { storedVariant } from '../algorithms/variants.js';
import { stateKey } from '../keys.js';
import { NO_SETTLE } from '../operations.js';
import {
  type AtomicBatch,
  type Operation,
  type Policy,
  STORED_READS,
  type Store,
  type StoreReply,
  type StoreRequest,
  type StoreResult,
} from '../types.js';
import { keyPart, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { NIL, Slots } from './memory-slots.js';
import { MemoryStoredEntries } from './memory-stored.js';

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
  // One table per limiter name (and tag), from the identifier as given to its slot: no key string to
  // build and hash per decision. Slots hold the state and the recency across every table (see
  // memory-slots.ts), so a use relinks two integers instead of deleting and re-adding a Map entry.
  readonly #tableIndex = new Map<string, number>();
  readonly #tables: Array<Map<string, number>> = [];
  readonly #slots: Slots;
  // The table of the last call, and its limiter name when it had no tag: consecutive calls mostly
  // come from the same limiter, and then find it by comparing one string.
  #table = new Map<string, number>();
  #tableNumber = -1;
  #tableName: string | undefined;
  #sweeper: NodeJS.Timeout | undefined;
  /**
   * Settles applied (a refund's or a charge's last operand, a reservation's id), by limiter name,
   * tag, identifier and id: when each is forgotten, the reset of the state it settled. The same
   * settle sent again changes nothing meanwhile, as the scripts' markers do.
   */
  readonly #settled = new Map<string, number>();
  /** What `decideReused` answers in, decision after decision. */
  readonly #reused: OutcomeInto = reusableOutcome();
  // The sweep judges expiry in the requests' time, which a limiter's own clock may set apart from ours.
  #lastNow = 0;
  #lastClock = 0;
  /** Limits and denials stored per identifier (see `LimiterOptions.overrides`), in the requests' time. */
  readonly stored = new MemoryStoredEntries((given) =>
    given === undefined ? this.#lastNow + (this.#clock() - this.#lastClock) : given,
  );

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
    this.#slots = new Slots(this.maxKeys);
    this.#sweeper = setInterval(() => this.sweep(), sweepIntervalMs);
    this.#sweeper.unref();
  }

  /** The number of identifiers currently held (expired ones count until swept or touched). */
  get size(): number {
    return this.#slots.size;
  }

  keyFor(name: string, identifier: string, tag?: string): string {
    return stateKey(this.prefix, name, identifier, tag);
  }

  decide(request: StoreRequest): Promise<StoreResult> {
    return Promise.resolve(this.decideNow(request));
  }

  /** Decides synchronously; what `decide` resolves to. */
  decideNow(request: StoreRequest): StoreResult {
    const operation = request.operation;
    const now = this.#now(request.now);
    // The usual request (no settle marker, nothing stored to read) goes straight to its policy.
    if (operation !== 'refund' && operation !== 'charge' && (request.storedReads ?? 0) === 0)
      return this.#decideUnder(request.policy, request, operation, request.cost, now);
    return this.#decideAt(request, operation, now);
  }

  /**
   * What `decideNow` answers, in one object reused from one decision to the next: for a caller that
   * copies what it needs before it decides again (the limiter's own in-process path), so that the
   * usual `limit` or `peek` allocates no outcome of its own. Results with fields (a charge) are new.
   */
  decideReused(request: StoreRequest): StoreResult {
    const operation = request.operation;
    if (operation !== 'limit' && operation !== 'peek') return this.decideNow(request);
    const now = this.#now(request.now);
    if ((request.storedReads ?? 0) !== 0) return this.#decideAt(request, operation, now);
    return this.#decideUnder(request.policy, request, operation, request.cost, now, this.#reused);
  }

  /**
   * Answers every request before returning. Requests decided `together` are decided as the Redis
   * store's combined script decides them: every key is looked at first, and `limit` takes from each
   * only when all allow.
   */
  submit<R extends StoreRequest>(requests: readonly R[], reply: StoreReply<R>, together?: AtomicBatch): void {
    if (together === undefined) {
      for (const request of requests) {
        let result: StoreResult;
        try {
          result = this.decideNow(request);
        } catch (error) {
          reply.failed(request, error);
          continue;
        }
        reply.answered(request, result);
      }
      return;
    }
    let results: StoreResult[];
    try {
      results = this.#together(requests);
    } catch (error) {
      for (const request of requests) reply.failed(request, error);
      return;
    }
    for (let i = 0; i < requests.length; i++) reply.answered(requests[i] as R, results[i] as StoreResult);
  }

  #together(requests: readonly StoreRequest[]): StoreResult[] {
    const first = requests[0];
    if (first === undefined) return [];
    const now = this.#now(first.now);
    const looked = requests.map((request) => this.#decideAt(request, 'peek', now));
    if (first.operation !== 'limit' || looked.some((result) => !result.allowed)) return looked;
    return requests.map((request) => this.#decideAt(request, request.operation, now));
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

  /** Makes the table of a limiter name and tag the current one (`#table`, `#tableNumber`). */
  #select(name: string, tag: string | undefined): void {
    if (tag === undefined && name === this.#tableName) return;
    // Names have no braces, so `name{tag` never equals a name.
    const tableKey = tag === undefined ? name : `${name}{${tag}`;
    let number = this.#tableIndex.get(tableKey);
    if (number === undefined) {
      number = this.#tables.length;
      this.#tables.push(new Map());
      this.#tableIndex.set(tableKey, number);
    }
    this.#table = this.#tables[number] as Map<string, number>;
    this.#tableNumber = number;
    this.#tableName = tag === undefined ? name : undefined;
  }

  /**
   * Decides a request as `operation` (an atomic group looks at every key before it takes), after
   * what is stored for its identifier when the request reads it, as lua/stored.lua does: a denial
   * refuses without looking at the quota; a stored limit decides by its variant of the policy.
   */
  #decideAt(request: StoreRequest, operation: Operation, now: number): StoreResult {
    const id = operation === 'refund' || operation === 'charge' ? request.operands?.at(-1) : undefined;
    if (id === undefined || id === NO_SETTLE) return this.#decideStored(request, operation, now);
    const marker = `${request.name}\n${request.tag ?? ''}\n${request.identifier}\n${id}`;
    if ((this.#settled.get(marker) ?? 0) > now) {
      // Applied before: what the quota is now, as a look at one unit says.
      return this.#decideUnder(request.policy, request, 'peek', 1, now);
    }
    const result = this.#decideStored(request, operation, now);
    this.#settled.set(marker, now + Math.max(1, Math.ceil(result.resetMs)));
    return result;
  }

  /** Decides a request after what is stored for its identifier (see #decideAt). */
  #decideStored(request: StoreRequest, operation: Operation, now: number): StoreResult {
    const reads = request.storedReads ?? 0;
    if (reads === 0) return this.#decideUnder(request.policy, request, operation, request.cost, now);
    const held = this.stored.find(request.name, request.identifier, request.tag);
    // Operations that ask for units read the denial; one asking more than a stored limit ever grants is refused.
    const asks = (reads & STORED_READS.deny) !== 0;
    if (held !== undefined && asks && held.deniedUntil > now) {
      const left = Math.ceil(held.deniedUntil - now);
      return { allowed: false, remaining: 0, resetMs: left, retryAfterMs: left, stored: -1 };
    }
    if (held !== undefined && (reads & STORED_READS.limit) !== 0 && held.limitEndsAt > now) {
      const variant = storedVariant(request.policy, held.limit);
      if (variant !== undefined) {
        const stored = held.limit;
        if (!asks || request.cost <= variant.maxCost) {
          return { ...this.#decideUnder(variant, request, operation, request.cost, now), stored };
        }
        const { remaining, resetMs } = this.#decideUnder(variant, request, 'peek', 1, now);
        return { allowed: false, remaining, resetMs, retryAfterMs: variant.windowMs, stored };
      }
    }
    return this.#decideUnder(request.policy, request, operation, request.cost, now);
  }

  /** Decides a request under `policy` (its own, or the variant a stored limit gives). */
  #decideUnder(
    policy: Policy,
    request: StoreRequest,
    operation: Operation,
    cost: number,
    now: number,
    into?: OutcomeInto,
  ): StoreResult {
    const identifier = request.identifier;
    this.#select(request.name, request.tag);
    const table = this.#table;
    const slots = this.#slots;
    let slot = table.get(identifier);
    let state: unknown;
    // An expired slot decides as no state, and is written over in place when the decision keeps a
    // state (GCRA's, on an identifier used less often than its state lasts, expires between calls):
    // removing it first would delete and re-add the table's entry on every such call.
    let expired = false;
    if (slot !== undefined) {
      if ((slots.expiresAt[slot] as number) <= now) expired = true;
      else state = slots.state(slot);
    }
    // A built-in policy writes the usual outcome into `into` (see decideReused); any other returns a new one.
    const decideInto = into === undefined ? undefined : (policy as DecidesInto)[DECIDE_INTO];
    const outcome =
      decideInto === undefined
        ? policy.decide(state, now, operation, cost, request.operands)
        : decideInto(into as OutcomeInto, state, now, operation, cost);
    const ttlMs = outcome.ttlMs;
    if (ttlMs > 0 && outcome.state !== undefined) {
      if (slot === undefined) {
        if (slots.size >= this.maxKeys) this.#remove(slots.oldest);
        slot = slots.take(identifier, this.#tableNumber);
        table.set(identifier, slot);
      }
      slots.keep(slot, outcome.state);
      slots.expiresAt[slot] = now + ttlMs;
    } else if (slot !== undefined && (expired || ttlMs === 0)) {
      this.#remove(slot);
      return outcome;
    } else if (ttlMs === 0) {
      return outcome;
    }
    // Any use, a denial or a peek too, makes the identifier the most recently used.
    if (slot !== undefined) slots.touch(slot);
    return outcome;
  }

  reset(name: string, identifier: string, tag?: string): Promise<void> {
    const table = this.#tableIndex.get(tag === undefined ? name : `${name}{${tag}`);
    const slot = table === undefined ? undefined : this.#tables[table]?.get(identifier);
    if (slot !== undefined) this.#remove(slot);
    return Promise.resolve();
  }

  /** Drops expired state now; runs on its own every `sweepIntervalMs`. Returns how many were dropped. */
  sweep(): number {
    const now = this.#lastNow + (this.#clock() - this.#lastClock);
    const slots = this.#slots;
    let dropped = 0;
    let slot = slots.oldest;
    while (slot !== NIL) {
      const newer = slots.newer[slot] as number;
      if ((slots.expiresAt[slot] as number) <= now) {
        this.#remove(slot);
        dropped++;
      }
      slot = newer;
    }
    this.stored.sweep(now);
    for (const [marker, until] of this.#settled) if (until <= now) this.#settled.delete(marker);
    return dropped;
  }

  /** Forgets every identifier, and what is stored for them. */
  clear(): void {
    for (const table of this.#tables) table.clear();
    this.#slots.clear();
    this.stored.clear();
    this.#settled.clear();
  }

  /** Stops the sweep timer. The store still works; expired state is then dropped only when touched. */
  close(): void {
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  #remove(slot: number): void {
    const slots = this.#slots;
    this.#tables[slots.tables[slot] as number]?.delete(slots.identifiers[slot] as string);
    slots.release(slot);
  }
}
