// Limits and denials stored per identifier in Redis: their keys beside the state, and one index per limiter for listing.
import { identifierPart, parseStoredMember, type StoredKind, storedIndexKey, storedKey } from '../../keys.js';
import type { StoredEntries, StoredEntry, StoredWrite } from '../../types.js';
import type { ScriptKey } from './scripts.js';
import type { PolicyWire } from './wire.js';

/** What the entries need of their store: a script run, and a command, each routed by a key. */
export interface EntryTransport {
  run(name: ScriptKey, args: string[], key: string): Promise<unknown>;
  command(args: readonly string[], key: string): Promise<unknown>;
}

/** The last argument of a decision script that reads no stored entry (lua/single.lua). */
export const NO_ENTRIES: readonly string[] = ['0'];

/**
 * What the combined script is told after each request's arguments when it reads stored entries
 * (lua/all.lua, lua/stored.lua): what to read, and the policy's limit rule.
 */
export function storedArguments(reads: number | undefined, wire: PolicyWire): readonly string[] {
  return [String(reads ?? 0), ...wire.limitRule];
}

/**
 * What a decision script is told last (lua/single.lua): the policy's limit rule, then what to read
 * of the entries stored beside each key; {@link NO_ENTRIES} when nothing is read.
 */
export function entryArguments(reads: number, wire: PolicyWire): readonly string[] {
  return [...wire.limitRule, String(reads)];
}

/**
 * The entries of a RedisStore. An entry is one key with the identifier's hash tag (a limit, or when
 * a denial ends), read by the decision's own script. Each write also updates the limiter's index
 * of its kind (another key, maybe on another shard), which listing reads instead of scanning the
 * keyspace; listing then reads each entry, so an index member whose entry is gone is not shown.
 */
export class RedisStoredEntries implements StoredEntries {
  readonly #prefix: string;
  readonly #transport: EntryTransport;

  constructor(prefix: string, transport: EntryTransport) {
    this.#prefix = prefix;
    this.#transport = transport;
  }

  async write(entry: StoredWrite): Promise<void> {
    const { kind, name, identifier, tag, value, now } = entry;
    const key = storedKey(this.#prefix, name, identifier, tag, kind);
    const time = now === undefined ? '' : String(now);
    if (kind === 'deny') {
      await this.#transport.run('stored-deny', ['', '', '1', key, time, String(value)], key);
    } else {
      const expiry = entry.ttlMs === undefined ? [] : ['PX', String(entry.ttlMs)];
      await this.#transport.command(['SET', key, String(value), ...expiry], key);
    }
    const ttl = kind === 'deny' ? value : entry.ttlMs;
    await this.#index(
      kind,
      name,
      identifierPart(identifier, tag),
      ttl === undefined ? 'inf' : String(ttl),
      time,
    );
  }

  async read(
    kind: StoredKind,
    name: string,
    identifier: string,
    tag: string | undefined,
  ): Promise<StoredEntry | undefined> {
    return this.#readEntry(kind, name, identifier, tag);
  }

  async delete(
    kind: StoredKind,
    name: string,
    identifier: string,
    tag: string | undefined,
    now: number | undefined,
  ): Promise<boolean> {
    const key = storedKey(this.#prefix, name, identifier, tag, kind);
    const deleted = Number(await this.#transport.command(['DEL', key], key)) === 1;
    await this.#index(kind, name, identifierPart(identifier, tag), '', now === undefined ? '' : String(now));
    return deleted;
  }

  async list(kind: StoredKind, name: string): Promise<StoredEntry[]> {
    const index = storedIndexKey(this.#prefix, name, kind);
    const members = (await this.#transport.command(['ZRANGE', index, '0', '-1'], index)) as unknown;
    if (!Array.isArray(members)) return [];
    const entries = await Promise.all(
      members.map((member) => {
        const parsed = parseStoredMember(String(member));
        return parsed === undefined ? undefined : this.#readEntry(kind, name, parsed.identifier, parsed.tag);
      }),
    );
    return entries.filter((entry): entry is StoredEntry => entry !== undefined);
  }

  async #readEntry(
    kind: StoredKind,
    name: string,
    identifier: string,
    tag: string | undefined,
  ): Promise<StoredEntry | undefined> {
    const key = storedKey(this.#prefix, name, identifier, tag, kind);
    const [value, ttl] = await Promise.all([
      this.#transport.command(['GET', key], key),
      this.#transport.command(['PTTL', key], key),
    ]);
    const number = value === null || value === undefined ? Number.NaN : Number(String(value));
    const ttlMs = Number(ttl);
    // Expired between the two reads, or not written by sluice.
    if (!Number.isFinite(number) || ttlMs === -2) return undefined;
    return { identifier, tag, value: number, ttlMs };
  }

  /** Adds (or with `ttl` '', removes) a member of the limiter's index of `kind`. */
  async #index(kind: StoredKind, name: string, member: string, ttl: string, time: string): Promise<void> {
    const index = storedIndexKey(this.#prefix, name, kind);
    await this.#transport.run('stored-index', ['', '', '1', index, time, member, ttl], index);
  }
}
