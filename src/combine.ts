// all(): several limiters decided as one; atomically by one script when they share a store and a slot.
import { checkIdentifier, checkTag } from './core/call.js';
import { type CombinedDecision, combineDecisions } from './core/combined-decision.js';
import { atomicGroupError, Group, type GroupOutcome, type PerMember } from './core/group.js';
import type { Member } from './core/member.js';
import { describeValue, ERROR_CODES, invalidOption, SluiceError } from './errors.js';
import type { MetricsRecorder } from './hooks.js';
import { type KeyOptions, type Limiter, limiterMember } from './limiter.js';
import { resolveRecorder } from './options.js';
import type { Operation } from './types.js';
import { groupSize, knownKeys, optionsObject } from './validate.js';

/** Options of {@link all}. */
export interface AllOptions {
  /**
   * `true`: one script decides every key together (every limiter must be on the same store, and a
   * call's keys must share a cluster slot: same identifier, or a shared `tag`; otherwise the call
   * rejects with ERR_SLUICE_CROSS_SLOT). `false`: each limiter decides on its own, side by side,
   * and when one denies what the others granted is refunded.
   * @default true when every limiter uses the same store, false otherwise
   */
  readonly atomic?: boolean;
  /**
   * Counts the decisions of every limiter given (see `sluice/metrics`), as each limiter's own
   * `metrics` option would, from now on: also those made outside this all().
   * @default undefined (each limiter's own recorder, if any)
   */
  readonly metrics?: MetricsRecorder;
}

/** Identifiers for a combined call: one for every limiter, or one per limiter in order. */
export type Identifiers = string | readonly string[];

/** Options of a combined call: each part a value for every limiter, or one per limiter in order. */
export interface CombinedCallOptions {
  /**
   * Units the request takes from each limiter.
   * @default 1
   */
  readonly cost?: PerMember<number>;
  /**
   * Per-call limits (see `CallOptions.limit`); `undefined` for a limiter keeps its policy's own.
   * @default each policy's own
   */
  readonly limit?: PerMember<number | undefined>;
  /** A hash tag shared by every key of the call (see `CallOptions.tag`). */
  readonly tag?: string;
}

/** Several limiters used as one. */
export interface CombinedLimiter {
  readonly limiters: readonly Limiter[];
  /** Whether checks are made by one atomic script (see {@link AllOptions.atomic}). */
  readonly atomic: boolean;
  /** Takes `cost` from every limiter when every one allows; a denial takes nothing from any. */
  limit(identifiers: Identifiers, options?: CombinedCallOptions): Promise<CombinedDecision>;
  /** The decision `limit` would give, consuming nothing. */
  peek(identifiers: Identifiers, options?: CombinedCallOptions): Promise<CombinedDecision>;
  /** Gives `amount` back to every limiter (each on its own; a refund needs no atomicity). */
  refund(identifiers: Identifiers, amount?: number, options?: KeyOptions): Promise<CombinedDecision>;
  /** Forgets the identifiers in every limiter. */
  reset(identifiers: Identifiers, options?: KeyOptions): Promise<void>;
}

let groupOf: (combined: unknown) => Group | undefined;

class Combined implements CombinedLimiter {
  readonly limiters: readonly Limiter[];
  readonly atomic: boolean;
  readonly #group: Group;

  static {
    groupOf = (combined) =>
      typeof combined === 'object' && combined !== null && #group in combined ? combined.#group : undefined;
  }

  constructor(limiters: readonly Limiter[], group: Group) {
    this.limiters = limiters;
    this.atomic = group.atomic;
    this.#group = group;
  }

  limit(identifiers: Identifiers, options?: CombinedCallOptions): Promise<CombinedDecision> {
    return this.#check('limit', identifiers, options);
  }

  peek(identifiers: Identifiers, options?: CombinedCallOptions): Promise<CombinedDecision> {
    return this.#check('peek', identifiers, options);
  }

  async refund(identifiers: Identifiers, amount = 1, options?: KeyOptions): Promise<CombinedDecision> {
    const ids = this.#identifiers(identifiers);
    // Validate every part first: a bad call writes nothing anywhere.
    for (let i = 0; i < this.limiters.length; i++) {
      const invalid = this.#member(i).check(ids[i], amount, 'amount', options?.tag, options?.limit);
      if (invalid instanceof SluiceError) throw invalid;
    }
    const decisions = await Promise.all(
      this.limiters.map((limiter, i) => limiter.refund(ids[i] as string, amount, options)),
    );
    return combineDecisions(this.#names(), decisions, true);
  }

  async reset(identifiers: Identifiers, options?: KeyOptions): Promise<void> {
    const ids = this.#identifiers(identifiers);
    for (const id of ids) {
      const invalid = checkIdentifier(id) ?? checkTag(options?.tag);
      if (invalid !== undefined) throw invalid;
    }
    await Promise.all(this.limiters.map((limiter, i) => limiter.reset(ids[i] as string, options)));
  }

  async #check(
    operation: Operation,
    identifiers: Identifiers,
    options: CombinedCallOptions | undefined,
  ): Promise<CombinedDecision> {
    const outcome = await decideGroup(this.#group, operation, identifiers, options);
    return combineDecisions(this.#names(), outcome.decisions, outcome.allowed);
  }

  #identifiers(identifiers: Identifiers): readonly string[] {
    const ids = identifiersFor(this.limiters.length, identifiers);
    if (ids instanceof SluiceError) throw ids;
    return ids;
  }

  #member(i: number): Member {
    return this.#group.members[i] as Member;
  }

  #names(): readonly string[] {
    return this.limiters.map((limiter) => limiter.name);
  }
}

/** The identifiers of a combined call, one per limiter, or the error. */
export function identifiersFor(count: number, identifiers: Identifiers): readonly string[] | SluiceError {
  if (typeof identifiers === 'string') return Array.from({ length: count }, () => identifiers);
  if (!Array.isArray(identifiers) || identifiers.length !== count) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`identifiers\` to be a string or an array of ${count} strings (one per limiter), got ${Array.isArray(identifiers) ? `an array of ${identifiers.length}` : describeValue(identifiers)}.`,
    );
  }
  return identifiers;
}

function perMember<T>(
  option: string,
  value: PerMember<T> | undefined,
  count: number,
): SluiceError | undefined {
  if (Array.isArray(value) && value.length !== count) {
    return invalidOption(
      option,
      `a value for every limiter, or an array of ${count} (one per limiter)`,
      value,
    );
  }
  return undefined;
}

/**
 * Checks a group once (`limit` or `peek`); rejects before anything is asked when a part is bad. The
 * HTTP middleware and the login guard decide through this too.
 */
export function decideGroup(
  group: Group,
  operation: Operation,
  identifiers: Identifiers,
  options: CombinedCallOptions | undefined,
): Promise<GroupOutcome> {
  const count = group.members.length;
  const ids = identifiersFor(count, identifiers);
  if (ids instanceof SluiceError) return Promise.reject(ids);
  const cost = options?.cost ?? 1;
  const limit = options?.limit;
  const shape = perMember('cost', cost, count) ?? perMember('limit', limit, count);
  if (shape !== undefined) return Promise.reject(shape);
  const calls = group.calls(operation, ids, cost, limit, options?.tag);
  if (calls instanceof SluiceError) return Promise.reject(calls);
  return group.decide(calls);
}

/** The group behind a value made by all(), or undefined. */
export function combinedGroup(value: unknown): Group | undefined {
  return groupOf(value);
}

/**
 * The group of limiters decided as one, as all() makes it: validated, atomic by default when every
 * limiter shares one store.
 */
export function groupFor(
  limiters: readonly unknown[],
  atomic: boolean | undefined,
  option = 'limiters',
  metrics?: MetricsRecorder,
): Group {
  if (!Array.isArray(limiters) || limiters.length === 0) {
    throw invalidOption(option, 'a non-empty array of limiters', limiters);
  }
  groupSize(option, limiters.length);
  const members = limiters.map((limiter, i) => {
    const member = limiterMember(limiter);
    if (member === undefined)
      throw invalidOption(`${option}[${i}]`, 'a limiter from createLimiter()', limiter);
    return member;
  });
  members.forEach((member, i) => {
    const twin = members.findIndex((other) => other.store === member.store && other.name === member.name);
    if (twin !== i) {
      throw invalidOption(
        `${option}[${i}].name`,
        `distinct from ${option}[${twin}].name on the same store (two limiters with one name share their keys)`,
        member.name,
      );
    }
  });
  if (metrics !== undefined) for (const member of members) member.attach(metrics);
  const sameStore = members.every((member) => member.store === members[0]?.store);
  const together = atomic ?? sameStore;
  if (together) {
    const refused = atomicGroupError(members);
    if (refused !== undefined) throw refused;
  }
  return new Group(members, together);
}

/**
 * Combines limiters: a request passes only when every one allows, and a denied request consumes
 * nothing anywhere. On one store, each check is one atomic script over every key (the keys must
 * share a cluster slot: the same identifier, or a shared `tag`); on several stores, limiters decide
 * side by side and grants are refunded when one denies.
 *
 * @example
 * const perUser = createLimiter({ store, policy: gcra({ limit: 100, periodMs: 60_000 }), name: 'user' });
 * const perTenant = createLimiter({ store, policy: gcra({ limit: 150, periodMs: 60_000 }), name: 'tenant' });
 * const both = all([perUser, perTenant]);
 * // keys rl:user:{tenant:9}:42 and rl:tenant:{tenant:9}:9: one slot, one script
 * const decision = await both.limit(['42', '9'], { tag: 'tenant:9' });
 * if (!decision.allowed) console.log(`denied by ${decision.deniedBy.join(', ')}`);
 */
export function all(limiters: readonly Limiter[], options?: AllOptions): CombinedLimiter {
  const raw = optionsObject('all options', options, false);
  knownKeys('all', raw, ['atomic', 'metrics']);
  if (raw.atomic !== undefined && typeof raw.atomic !== 'boolean') {
    throw invalidOption('all.atomic', 'a boolean', raw.atomic);
  }
  const metrics = resolveRecorder('all.metrics', raw.metrics);
  const group = groupFor(limiters, raw.atomic as boolean | undefined, 'limiters', metrics);
  return new Combined(Object.freeze([...limiters]), group);
}
