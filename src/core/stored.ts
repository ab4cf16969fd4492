// What operators store for a limiter's identifiers: limits and denials, checked, then written through the store.
import { invalidOption, SluiceError } from '../errors.js';
import type { StoredKind } from '../keys.js';
import { OPERATIONS } from '../operations.js';
import {
  type Denial,
  type DenyOptions,
  type Operation,
  type Policy,
  STORED_READS,
  type StoredEntries,
  type StoredEntry,
  type StoredLimit,
  type StoredLimitOptions,
  type StoredOptions,
} from '../types.js';
import { durationMs, knownKeys, optionsObject } from '../validate.js';
import { checkIdentifier, checkTag, policyFor, readClock } from './checks.js';
import type { Pipeline } from './pipeline.js';

/**
 * What a call of a limiter with `overrides` has its store read (StoreRequest.storedReads): the
 * denial for the operations that ask for units (those whose denials the deny cache remembers, and a
 * schedule: an operator's block holds for a future slot too, as wait() and throttle() take them),
 * and the limit unless the call gives its own, which wins. A charge reads no denial: it records
 * usage already served, which counts against what comes after the denial.
 */
export function storedReads(policy: Policy, operation: Operation, callLimit: number | undefined): number {
  const asks = OPERATIONS[operation].readsDenial;
  const deny = asks ? STORED_READS.deny : 0;
  const limit = callLimit === undefined && policy.rule.storedLimit !== undefined ? STORED_READS.limit : 0;
  return deny | limit;
}

/** How long `deny` denies when `forMs` is not given: an hour. */
export const DEFAULT_DENY_MS = 3_600_000;

function limitOf(entry: StoredEntry): StoredLimit {
  const { identifier, tag, value, ttlMs } = entry;
  return { identifier, tag, limit: value, expiresInMs: ttlMs === -1 ? undefined : ttlMs };
}

function denialOf(entry: StoredEntry): Denial {
  return { identifier: entry.identifier, tag: entry.tag, expiresInMs: entry.ttlMs };
}

function byIdentifier<T extends { readonly identifier: string; readonly tag: string | undefined }>(
  entries: T[],
): T[] {
  const text = (entry: T): string => `${entry.identifier}\n${entry.tag ?? ''}`;
  return entries.sort((a, b) => (text(a) < text(b) ? -1 : text(a) > text(b) ? 1 : 0));
}

/**
 * A limiter's stored limits and denials (`setLimit`, `deny` and the rest). Every call is checked
 * before anything is written; the store's failure rejects the call (no failure policy answers for
 * an operator's write). The decisions read the entries in the store's own script (see
 * `LimiterOptions.overrides`); this process forgets its remembered denials of the identifier at once.
 */
export class StoredOverrides {
  readonly #pipeline: Pipeline;

  constructor(pipeline: Pipeline) {
    this.#pipeline = pipeline;
  }

  async setLimit(identifier: string, limit: number, options?: StoredLimitOptions): Promise<void> {
    const raw = optionsObject('setLimit options', options, false);
    knownKeys('setLimit', raw, ['tag', 'ttlMs']);
    const entries = this.#entries('setLimit()');
    const tag = this.#checked(identifier, raw.tag);
    const policy = this.#pipeline.policy;
    if (policy.rule.storedLimit === undefined) {
      throw invalidOption(
        'policy',
        'a policy that takes a limit per identifier (a built-in one)',
        policy.description,
      );
    }
    const variant = policyFor(policy, limit);
    if (variant instanceof SluiceError) throw variant;
    const ttlMs = raw.ttlMs === undefined ? undefined : durationMs('ttlMs', raw.ttlMs);
    const { name } = this.#pipeline;
    await entries.write({ kind: 'limit', name, identifier, tag, value: limit, ttlMs, now: this.#now() });
    this.#pipeline.forgetDenial(identifier, tag);
  }

  async getLimit(identifier: string, options?: StoredOptions): Promise<StoredLimit | undefined> {
    const entry = await this.#read('getLimit', 'limit', identifier, options);
    return entry === undefined ? undefined : limitOf(entry);
  }

  async clearLimit(identifier: string, options?: StoredOptions): Promise<boolean> {
    return this.#delete('clearLimit', 'limit', identifier, options);
  }

  async listLimits(): Promise<StoredLimit[]> {
    const entries = await this.#entries('listLimits()').list('limit', this.#pipeline.name);
    return byIdentifier(entries.map(limitOf));
  }

  async deny(identifier: string, options?: DenyOptions): Promise<void> {
    const raw = optionsObject('deny options', options, false);
    knownKeys('deny', raw, ['tag', 'forMs']);
    const entries = this.#entries('deny()');
    const tag = this.#checked(identifier, raw.tag);
    const forMs = raw.forMs === undefined ? DEFAULT_DENY_MS : durationMs('forMs', raw.forMs);
    const { name } = this.#pipeline;
    await entries.write({
      kind: 'deny',
      name,
      identifier,
      tag,
      value: forMs,
      ttlMs: forMs,
      now: this.#now(),
    });
  }

  async undeny(identifier: string, options?: StoredOptions): Promise<boolean> {
    return this.#delete('undeny', 'deny', identifier, options);
  }

  async listDenials(): Promise<Denial[]> {
    const entries = await this.#entries('listDenials()').list('deny', this.#pipeline.name);
    return byIdentifier(entries.map(denialOf));
  }

  async #read(
    method: string,
    kind: StoredKind,
    identifier: string,
    options: StoredOptions | undefined,
  ): Promise<StoredEntry | undefined> {
    const raw = optionsObject(`${method} options`, options, false);
    knownKeys(method, raw, ['tag']);
    const entries = this.#entries(`${method}()`);
    const tag = this.#checked(identifier, raw.tag);
    return entries.read(kind, this.#pipeline.name, identifier, tag);
  }

  async #delete(
    method: string,
    kind: StoredKind,
    identifier: string,
    options: StoredOptions | undefined,
  ): Promise<boolean> {
    const raw = optionsObject(`${method} options`, options, false);
    knownKeys(method, raw, ['tag']);
    const entries = this.#entries(`${method}()`);
    const tag = this.#checked(identifier, raw.tag);
    const deleted = await entries.delete(kind, this.#pipeline.name, identifier, tag, this.#now());
    this.#pipeline.forgetDenial(identifier, tag);
    return deleted;
  }

  /** The store's entries, for a limiter made with `overrides` (whose store was checked to have them). */
  #entries(method: string): StoredEntries {
    const { overrides, store } = this.#pipeline;
    if (!overrides || store.stored === undefined) {
      throw invalidOption(
        'overrides',
        `true for ${method}: this limiter's decisions do not read what is stored for identifiers`,
        overrides,
      );
    }
    return store.stored;
  }

  /** The identifier and tag, checked; the tag as it is then. */
  #checked(identifier: unknown, tag: unknown): string | undefined {
    const invalid = checkIdentifier(identifier) ?? checkTag(tag);
    if (invalid !== undefined) throw invalid;
    return tag as string | undefined;
  }

  /** The limiter's time, or undefined for the store's own clock. */
  #now(): number | undefined {
    const now = readClock(this.#pipeline.clock);
    if (now instanceof SluiceError) throw now;
    return now;
  }
}
