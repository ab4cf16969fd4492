// Where a global budget's ledger lives: its scripts run by a store that runs scripts (Redis) every region reaches, or its twins in an in-process store's process.
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { Store, StoreScripts } from '../types.js';
import { type BucketLedgerReply, type BucketLedgerSettings, bucketLedger } from './ledger-bucket.js';
import {
  gapsArgument,
  type RegionLeaseReply,
  type RegionLeaseSettings,
  regionLeases,
} from './ledger-regions.js';
import {
  type LedgerFields,
  type LedgerOutcome,
  type WindowLedgerReply,
  type WindowLedgerRequest,
  type WindowLedgerSettings,
  windowLedger,
} from './ledger-windows.js';

/** Identifiers per ledger call: each is a few small hash commands, so a call stays well under a millisecond. */
const MAX_KEYS_PER_CALL = 64;

/** The ledger of every budget kept in one global store. Calls carry many identifiers each. */
export interface Ledger {
  /** Script calls sent to the global store so far (one per batch of identifiers). */
  readonly calls: number;
  /** Identifiers those calls carried, summed (an identifier asked twice counts twice). */
  readonly entries: number;
  /** The key of one identifier's ledger for the limiter `name`: `<prefix>:budget:<name>:{<identifier>}` (or the tag in braces). */
  keyFor(name: string, identifier: string, tag?: string): string;
  /** The key of the region leases of the limiter `name` (one per budget). */
  regionsKeyFor(name: string): string;
  /** Renews a region's lease of its floor; answers every region's gap (see ledger-regions.ts). */
  regions(key: string, settings: RegionLeaseSettings, now: number | undefined): Promise<RegionLeaseReply>;
  /** The same, answered at once by a ledger in this process (absent where the ledger is remote). */
  regionsNow?(key: string, settings: RegionLeaseSettings): RegionLeaseReply;
  /** Window budgets: records demand, grants chunks and shares; one reply per key, in order. */
  windows(
    keys: readonly string[],
    settings: WindowLedgerSettings,
    requests: readonly WindowLedgerRequest[],
    now: number | undefined,
  ): Promise<WindowLedgerReply[]>;
  /** Bucket budgets: records demand (units per key) and grants leases; one reply per key, in order. */
  bucket(
    keys: readonly string[],
    settings: BucketLedgerSettings,
    units: readonly number[],
    now: number | undefined,
  ): Promise<BucketLedgerReply[]>;
}

/**
 * The ledger in `store`: its scripts, where the store runs scripts (Redis: `Store.scripts`); the
 * twins in this process, where the store decides in this process (`Store.decideNow`: the memory
 * store), so that regions made in one process with one store share it.
 */
export function ledgerIn(store: Store): Ledger {
  if (store.scripts !== undefined) return new ScriptLedger(store, store.scripts);
  if (store.decideNow !== undefined) return memoryLedger(store);
  throw new SluiceError(
    ERROR_CODES.INVALID_OPTION,
    `Expected \`budget.global\` to be a RedisStore or a MemoryStore, got a store of kind ${JSON.stringify(store.kind)}: the ledger runs scripts of its own.`,
  );
}

/** The key of one identifier's ledger: `<prefix>:budget:<name>:{<identifier>}` (or the tag in braces). */
function ledgerKey(store: Store, name: string, identifier: string, tag: string | undefined): string {
  return store.keyFor(`budget:${name}`, identifier, tag);
}

/** The key of a budget's region leases: `<prefix>:budget-regions:<name>:{leases}`, apart from every identifier's. */
function regionsKey(store: Store, name: string): string {
  return store.keyFor(`budget-regions:${name}`, 'leases');
}

/** Indexes of `keys` grouped into calls: by group (a cluster's slot, see StoreScripts), at most MAX_KEYS_PER_CALL each. */
function calls(keys: readonly string[], groupOf: (key: string) => number): number[][] {
  const groups = new Map<number, number[][]>();
  keys.forEach((key, i) => {
    const slot = groupOf(key);
    const runs = groups.get(slot) ?? [];
    const last = runs.at(-1);
    if (last === undefined || last.length >= MAX_KEYS_PER_CALL) runs.push([i]);
    else last.push(i);
    groups.set(slot, runs);
  });
  return [...groups.values()].flat();
}

function badReply(script: string, expected: number, reply: unknown): SluiceError {
  return new SluiceError(
    ERROR_CODES.BAD_REPLY,
    `Expected ${expected} integers from the ${script} script, got ${Array.isArray(reply) ? `${reply.length} values` : typeof reply}.`,
  );
}

/** The ledger's scripts (ledger-windows.lua, ledger-bucket.lua), run by the global store. */
class ScriptLedger implements Ledger {
  readonly #store: Store;
  readonly #scripts: StoreScripts;
  calls = 0;
  entries = 0;

  constructor(store: Store, scripts: StoreScripts) {
    this.#store = store;
    this.#scripts = scripts;
  }

  keyFor(name: string, identifier: string, tag?: string): string {
    return ledgerKey(this.#store, name, identifier, tag);
  }

  regionsKeyFor(name: string): string {
    return regionsKey(this.#store, name);
  }

  async regions(
    key: string,
    settings: RegionLeaseSettings,
    now: number | undefined,
  ): Promise<RegionLeaseReply> {
    const { region, regions, leaseMs, windowMs } = settings;
    const args = [now === undefined ? '' : String(now), ...[region, regions, leaseMs, windowMs].map(String)];
    this.calls++;
    this.entries++;
    const answer = await this.#scripts.run('ledger-regions', [key], args);
    if (!Array.isArray(answer) || answer.length !== 1 + 2 * regions) {
      throw badReply('ledger-regions', 1 + 2 * regions, answer);
    }
    const values = answer.map(Number);
    const gaps = [];
    for (let s = 0; s < regions; s++) {
      gaps.push({ out: values[1 + 2 * s] as number, back: values[2 + 2 * s] as number });
    }
    return { now: values[0] as number, gaps };
  }

  windows(
    keys: readonly string[],
    settings: WindowLedgerSettings,
    requests: readonly WindowLedgerRequest[],
    now: number | undefined,
  ): Promise<WindowLedgerReply[]> {
    const { region, regions, windowMs, limit, floor, reservePermille, sliding, index } = settings;
    const head = [region, regions, windowMs, limit, floor, reservePermille, sliding ? 1 : 0, index].map(
      String,
    );
    head.push(gapsArgument(settings.gaps));
    return this.#run(
      'ledger-windows',
      4,
      keys,
      now,
      head,
      (i) => {
        const request = requests[i] as WindowLedgerRequest;
        return [
          String(request.demand),
          String(request.want),
          request.claim ? '1' : '0',
          String(request.release),
          String(request.before ?? -1),
        ];
      },
      (values) => ({
        granted: values[0] as number,
        next: values[1] as number,
        total: values[2] as number,
        gained: values[3] as number,
      }),
    );
  }

  bucket(
    keys: readonly string[],
    settings: BucketLedgerSettings,
    units: readonly number[],
    now: number | undefined,
  ): Promise<BucketLedgerReply[]> {
    const { region, regions, leaseMs, pool, tau, floor } = settings;
    const head = [region, regions, leaseMs, pool, tau, floor].map(String);
    head.push(gapsArgument(settings.gaps), settings.holdsFloor === false ? '0' : '1');
    return this.#run(
      'ledger-bucket',
      3,
      keys,
      now,
      head,
      (i) => [String(units[i])],
      (values) => ({
        lease: values[0] as number,
        leased: values[1] as number,
        demandPerSecond: values[2] as number,
      }),
    );
  }

  /** One script call per group of keys (see calls()); `width` integers per key come back. */
  async #run<R>(
    name: 'ledger-windows' | 'ledger-bucket',
    width: number,
    keys: readonly string[],
    now: number | undefined,
    head: readonly string[],
    perKey: (i: number) => string[],
    reply: (values: readonly number[]) => R,
  ): Promise<R[]> {
    const replies: R[] = new Array(keys.length);
    await Promise.all(
      calls(keys, this.#scripts.groupOf).map(async (group) => {
        const args = [now === undefined ? '' : String(now), ...head];
        for (const i of group) args.push(...perKey(i));
        this.calls++;
        this.entries += group.length;
        const answer = await this.#scripts.run(
          name,
          group.map((i) => keys[i] as string),
          args,
        );
        if (!Array.isArray(answer) || answer.length !== group.length * width) {
          throw badReply(name, group.length * width, answer);
        }
        group.forEach((i, at) => {
          replies[i] = reply(answer.slice(at * width, (at + 1) * width).map(Number));
        });
      }),
    );
    return replies;
  }
}

interface Entry {
  fields: LedgerFields;
  expiresAt: number;
}

/** How often the memory ledger drops expired entries, at most. */
const SWEEP_MS = 1000;

/** The memory ledger of each in-process store: regions made in one process with one store share it. */
const memoryLedgers = new WeakMap<Store, MemoryLedger>();

function memoryLedger(store: Store): MemoryLedger {
  let ledger = memoryLedgers.get(store);
  if (ledger === undefined) {
    ledger = new MemoryLedger(store);
    memoryLedgers.set(store, ledger);
  }
  return ledger;
}

/** The twins over a map in this process, for tests, examples and one-process setups. */
class MemoryLedger implements Ledger {
  readonly #store: Store;
  readonly #held = new Map<string, Entry>();
  #sweptAt = 0;
  calls = 0;
  entries = 0;

  constructor(store: Store) {
    this.#store = store;
  }

  keyFor(name: string, identifier: string, tag?: string): string {
    return ledgerKey(this.#store, name, identifier, tag);
  }

  regionsKeyFor(name: string): string {
    return regionsKey(this.#store, name);
  }

  async regions(
    key: string,
    settings: RegionLeaseSettings,
    now: number | undefined,
  ): Promise<RegionLeaseReply> {
    const [reply] = await this.#run([key], now, (fields, at) => regionLeases(fields, at, settings));
    return reply as RegionLeaseReply;
  }

  regionsNow(key: string, settings: RegionLeaseSettings): RegionLeaseReply {
    return this.#runNow([key], undefined, (fields, at) =>
      regionLeases(fields, at, settings),
    )[0] as RegionLeaseReply;
  }

  windows(
    keys: readonly string[],
    settings: WindowLedgerSettings,
    requests: readonly WindowLedgerRequest[],
    now: number | undefined,
  ): Promise<WindowLedgerReply[]> {
    return this.#run(keys, now, (fields, at, i) =>
      windowLedger(fields, at, settings, requests[i] as WindowLedgerRequest),
    );
  }

  bucket(
    keys: readonly string[],
    settings: BucketLedgerSettings,
    units: readonly number[],
    now: number | undefined,
  ): Promise<BucketLedgerReply[]> {
    return this.#run(keys, now, (fields, at, i) => bucketLedger(fields, at, settings, units[i] as number));
  }

  /** Fields of a key as the Redis ledger would hold them (for tests), or undefined when it holds none. */
  fieldsOf(key: string, now = Date.now()): LedgerFields | undefined {
    const entry = this.#held.get(key);
    return entry === undefined || entry.expiresAt <= now ? undefined : entry.fields;
  }

  #run<R>(
    keys: readonly string[],
    given: number | undefined,
    step: (fields: LedgerFields, now: number, i: number) => LedgerOutcome<R>,
  ): Promise<R[]> {
    return Promise.resolve(this.#runNow(keys, given, step));
  }

  #runNow<R>(
    keys: readonly string[],
    given: number | undefined,
    step: (fields: LedgerFields, now: number, i: number) => LedgerOutcome<R>,
  ): R[] {
    const now = given ?? Date.now();
    this.#sweep(now);
    this.calls += calls(keys, () => 0).length;
    this.entries += keys.length;
    const replies = keys.map((key, i) => {
      const entry = this.#held.get(key);
      const fields = entry === undefined || entry.expiresAt <= now ? new Map() : entry.fields;
      const outcome = step(fields, now, i);
      if (outcome.fields.size === 0) this.#held.delete(key);
      else this.#held.set(key, { fields: outcome.fields, expiresAt: now + outcome.ttlMs });
      return outcome.reply;
    });
    return replies;
  }

  #sweep(now: number): void {
    if (now - this.#sweptAt < SWEEP_MS) return;
    this.#sweptAt = now;
    for (const [key, entry] of this.#held) if (entry.expiresAt <= now) this.#held.delete(key);
  }
}

/** The fields the memory ledger of `store` holds for `key` (for tests); undefined when none. */
export function memoryLedgerFields(store: Store, key: string, now?: number): LedgerFields | undefined {
  return memoryLedger(store).fieldsOf(key, now);
}
