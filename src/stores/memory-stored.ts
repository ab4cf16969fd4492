// The memory store's limits and denials stored per identifier, and the decision that reads them first.
import type { StoredKind } from '../keys.js';
import type { StoredEntries, StoredEntry, StoredWrite } from '../types.js';

/** What is stored for one identifier: a limit until `limitEndsAt` (Infinity: until cleared), a denial until `deniedUntil`. */
export interface Held {
  limit: number;
  limitEndsAt: number;
  deniedUntil: number;
}

/** The table of a limiter name and tag; names have no braces, so `name{tag` never equals a name. */
function tableKey(name: string, tag: string | undefined): string {
  return tag === undefined ? name : `${name}{${tag}`;
}

/**
 * Entries kept in this process, judged in the time of the requests that read them, as the scripts
 * judge theirs: a denial ends at the time it names (`floor(now) + forMs`, as lua/stored-deny.lua
 * writes it), a limit at its expiry. Ended entries are dropped when met or swept. Nothing here is
 * bounded by `maxKeys`: entries are what operators write, not what traffic makes.
 */
export class MemoryStoredEntries implements StoredEntries {
  readonly #tables = new Map<string, Map<string, Held>>();
  /** The time of a write or a read that brings none: the store's estimate of its requests' time. */
  readonly #now: (given: number | undefined) => number;

  constructor(now: (given: number | undefined) => number) {
    this.#now = now;
  }

  /** What is stored for an identifier, if anything (ended parts included: the caller judges them). */
  find(name: string, identifier: string, tag: string | undefined): Held | undefined {
    return this.#tables.get(tableKey(name, tag))?.get(identifier);
  }

  write(entry: StoredWrite): Promise<void> {
    const key = tableKey(entry.name, entry.tag);
    let table = this.#tables.get(key);
    if (table === undefined) {
      table = new Map();
      this.#tables.set(key, table);
    }
    const now = this.#now(entry.now);
    const held = table.get(entry.identifier) ?? { limit: 0, limitEndsAt: 0, deniedUntil: 0 };
    if (entry.kind === 'deny') {
      held.deniedUntil = Math.floor(now) + entry.value;
    } else {
      held.limit = entry.value;
      held.limitEndsAt = entry.ttlMs === undefined ? Number.POSITIVE_INFINITY : now + entry.ttlMs;
    }
    table.set(entry.identifier, held);
    return Promise.resolve();
  }

  read(
    kind: StoredKind,
    name: string,
    identifier: string,
    tag: string | undefined,
  ): Promise<StoredEntry | undefined> {
    const held = this.find(name, identifier, tag);
    return Promise.resolve(
      held === undefined ? undefined : this.#entry(kind, identifier, tag, held, this.#now(undefined)),
    );
  }

  delete(
    kind: StoredKind,
    name: string,
    identifier: string,
    tag: string | undefined,
    now: number | undefined,
  ): Promise<boolean> {
    const table = this.#tables.get(tableKey(name, tag));
    const held = table?.get(identifier);
    if (table === undefined || held === undefined) return Promise.resolve(false);
    const existed = this.#entry(kind, identifier, tag, held, this.#now(now)) !== undefined;
    if (kind === 'deny') held.deniedUntil = 0;
    else held.limitEndsAt = 0;
    if (held.deniedUntil === 0 && held.limitEndsAt === 0) table.delete(identifier);
    return Promise.resolve(existed);
  }

  list(kind: StoredKind, name: string): Promise<StoredEntry[]> {
    const now = this.#now(undefined);
    const entries: StoredEntry[] = [];
    for (const [key, table] of this.#tables) {
      if (key !== name && !key.startsWith(`${name}{`)) continue;
      const tag = key === name ? undefined : key.slice(name.length + 1);
      for (const [identifier, held] of table) {
        const entry = this.#entry(kind, identifier, tag, held, now);
        if (entry !== undefined) entries.push(entry);
      }
    }
    return Promise.resolve(entries);
  }

  /** Drops every entry that has ended by `now`. */
  sweep(now: number): void {
    for (const [key, table] of this.#tables) {
      for (const [identifier, held] of table) {
        if (held.deniedUntil <= now) held.deniedUntil = 0;
        if (held.limitEndsAt <= now) held.limitEndsAt = 0;
        if (held.deniedUntil === 0 && held.limitEndsAt === 0) table.delete(identifier);
      }
      if (table.size === 0) this.#tables.delete(key);
    }
  }

  /** Forgets every entry. */
  clear(): void {
    this.#tables.clear();
  }

  #entry(
    kind: StoredKind,
    identifier: string,
    tag: string | undefined,
    held: Held,
    now: number,
  ): StoredEntry | undefined {
    if (kind === 'deny') {
      if (held.deniedUntil <= now) return undefined;
      return { identifier, tag, value: held.deniedUntil, ttlMs: Math.ceil(held.deniedUntil - now) };
    }
    if (held.limitEndsAt <= now) return undefined;
    const ttlMs = held.limitEndsAt === Number.POSITIVE_INFINITY ? -1 : Math.ceil(held.limitEndsAt - now);
    return { identifier, tag, value: held.limit, ttlMs };
  }
}
