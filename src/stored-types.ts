// What operators store per identifier for limiters with `overrides`: limits and denials, as the limiter, the
// stores and the tools speak of them.
import type { StoredKind } from './keys.js';

export type { StoredKind } from './keys.js';

/** What is stored for one identifier of a limiter (see `LimiterOptions.overrides`). */
export interface StoredEntry {
  readonly identifier: string;
  readonly tag: string | undefined;
  /** A limit: the limit. A denial: when it ends, in the limiter's milliseconds. */
  readonly value: number;
  /** Milliseconds until the entry expires; -1 when it is kept until cleared. */
  readonly ttlMs: number;
}

/** A write of one stored entry. */
export interface StoredWrite {
  readonly kind: StoredKind;
  readonly name: string;
  readonly identifier: string;
  readonly tag: string | undefined;
  /** A limit: the limit. A denial: how long it lasts, in ms. */
  readonly value: number;
  /** How long the entry is kept, in ms; undefined until cleared (a denial always ends: its `value`). */
  readonly ttlMs: number | undefined;
  /** The limiter's milliseconds, or undefined for the store's own clock. */
  readonly now: number | undefined;
}

/** Where a store keeps what operators store for identifiers: their limits and denials. */
export interface StoredEntries {
  /** Writes an entry, replacing the identifier's entry of that kind. */
  write(entry: StoredWrite): Promise<void>;
  /** The identifier's entry of a kind, if it has one. */
  read(
    kind: StoredKind,
    name: string,
    identifier: string,
    tag: string | undefined,
  ): Promise<StoredEntry | undefined>;
  /** Deletes the identifier's entry of a kind; whether there was one. `now` as in {@link StoredWrite.now}. */
  delete(
    kind: StoredKind,
    name: string,
    identifier: string,
    tag: string | undefined,
    now: number | undefined,
  ): Promise<boolean>;
  /** Every entry of a kind the limiter named `name` holds. */
  list(kind: StoredKind, name: string): Promise<StoredEntry[]>;
}

/** Options of `setLimit`. */
export interface StoredLimitOptions {
  /** The tag the identifier's calls are made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
  /**
   * How long the limit is kept, in ms; then the policy's own applies again. A stored limit is
   * configuration, not a counter: without `ttlMs` it is kept until `clearLimit`.
   * @default undefined (kept until cleared)
   */
  readonly ttlMs?: number;
}

/** Options of `deny`. */
export interface DenyOptions {
  /** The tag the identifier's calls are made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
  /**
   * How long the identifier is denied, in ms; the denial then expires by itself. A denial always
   * ends: one forgotten would refuse a client for good (keep permanent denials in code, such as
   * the middleware's `deny` option).
   * @default 3_600_000 (one hour)
   */
  readonly forMs?: number;
}

/** Options of `getLimit`, `clearLimit` and `undeny`. */
export interface StoredOptions {
  /** The tag the identifier's calls are made with, if any (see {@link CallOptions.tag}). */
  readonly tag?: string;
}

/** A limit stored for an identifier (see `setLimit`). */
export interface StoredLimit {
  readonly identifier: string;
  readonly tag: string | undefined;
  readonly limit: number;
  /** Milliseconds until the limit expires; `undefined` when it is kept until cleared. */
  readonly expiresInMs: number | undefined;
}

/** A stored denial (see `deny`). */
export interface Denial {
  readonly identifier: string;
  readonly tag: string | undefined;
  /** Milliseconds until the denial ends. */
  readonly expiresInMs: number;
}
