// What all() returns, and the group of limiters it, the middleware and the penalties decide through.
import { invalidOption, SluiceError } from '../errors.js';
import type { MetricsRecorder } from '../hooks.js';
import type { KeyOptions, Limiter, Operation } from '../types.js';
import { groupSize } from '../validate.js';
import { checkIdentifier, checkTag } from './checks.js';
import { type CombinedDecision, combineDecisions } from './combined-decision.js';
import { atomicGroupError, Group, type Identifiers, identifiersFor, type PerMember } from './group.js';
import { limiterPipeline } from './limiter.js';
import { Pipeline } from './pipeline.js';

/** Options of a combined call: each part a value for every limiter, or one per limiter in order. */
export interface CombinedCallOptions {
  /**
   * Units the request takes from each limiter.
   * @default 1
   */
  readonly cost?: PerMember<number>;
  /**
   * Per-call limits (see `EntryOptions.limit`); `undefined` for a limiter keeps its policy's own.
   * @default each policy's own
   */
  readonly limit?: PerMember<number | undefined>;
  /** A hash tag shared by every key of the call (see `EntryOptions.tag`). */
  readonly tag?: string;
}

/** Several limiters used as one. */
export interface CombinedLimiter {
  readonly limiters: readonly Limiter[];
  /** Whether checks are made by one atomic script (see `AllOptions.atomic`). */
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

/** The limiters of all(), decided as one Group. */
export class Combined implements CombinedLimiter {
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
    // Side by side, every part checked first (Pipeline.batch): a bad call writes nothing anywhere.
    const requests = this.#group.pipelines.map((pipeline, i) => {
      return { pipeline, operation: 'refund' as const, identifier: ids[i], amount, parts: options };
    });
    const { decisions } = await Pipeline.batch(requests, false);
    return combineDecisions(this.#names(), decisions, true);
  }

  async reset(identifiers: Identifiers, options?: KeyOptions): Promise<void> {
    const ids = this.#identifiers(identifiers);
    for (const id of ids) {
      const invalid = checkIdentifier(id) ?? checkTag(options?.tag);
      if (invalid !== undefined) throw invalid;
    }
    await this.#group.reset(ids, options?.tag);
  }

  async #check(
    operation: Operation,
    identifiers: Identifiers,
    options: CombinedCallOptions | undefined,
  ): Promise<CombinedDecision> {
    const outcome = await this.#group.run(operation, identifiers, options);
    return combineDecisions(this.#names(), outcome.decisions, outcome.allowed);
  }

  #identifiers(identifiers: Identifiers): readonly string[] {
    const ids = identifiersFor(this.limiters.length, identifiers);
    if (ids instanceof SluiceError) throw ids;
    return ids;
  }

  #names(): readonly string[] {
    return this.limiters.map((limiter) => limiter.name);
  }
}

/** The group behind a value made by all(), or undefined. */
export function combinedGroup(value: unknown): Group | undefined {
  return groupOf(value);
}

/** How groupFor() makes a group. */
export interface GroupSettings {
  /** One script for all (see `AllOptions.atomic`); by default when every limiter shares one store. */
  readonly atomic?: boolean | undefined;
  /** The option named in errors. @default 'limiters' */
  readonly option?: string;
  /** A recorder that counts every limiter's decisions from now on. */
  readonly metrics?: MetricsRecorder | undefined;
  /**
   * Whether a limiter may appear more than once, deciding side by side (Envoy, where one rule may
   * match two descriptors). Otherwise two limiters with one name on one store are refused.
   * @default false
   */
  readonly repeats?: boolean;
}

/** The pipelines of limiters made by createLimiter(), or the error naming the first that is not one. */
function pipelinesOf(limiters: readonly unknown[], option: string): Pipeline[] {
  if (!Array.isArray(limiters) || limiters.length === 0) {
    throw invalidOption(option, 'a non-empty array of limiters', limiters);
  }
  groupSize(option, limiters.length);
  return limiters.map((limiter, i) => {
    const pipeline = limiterPipeline(limiter);
    if (pipeline !== undefined) return pipeline;
    throw invalidOption(
      `${option}[${i}]`,
      'a limiter from createLimiter() (a copy such as { ...limiter } is not one: pass the limiter itself)',
      limiter,
    );
  });
}

/**
 * The group of limiters decided as one, as all() makes it: validated, atomic by default when every
 * limiter shares one store.
 */
export function groupFor(limiters: readonly unknown[], settings: GroupSettings = {}): Group {
  const option = settings.option ?? 'limiters';
  const pipelines = pipelinesOf(limiters, option);
  if (settings.repeats !== true) {
    pipelines.forEach((pipeline, i) => {
      const twin = pipelines.findIndex(
        (other) => other.store === pipeline.store && other.name === pipeline.name,
      );
      if (twin === i) return;
      throw invalidOption(
        `${option}[${i}].name`,
        `distinct from ${option}[${twin}].name on the same store (two limiters with one name share their keys)`,
        pipeline.name,
      );
    });
  }
  if (settings.metrics !== undefined) for (const pipeline of pipelines) pipeline.attach(settings.metrics);
  const together = settings.atomic ?? pipelines.every((pipeline) => pipeline.store === pipelines[0]?.store);
  if (together) {
    const refused = atomicGroupError(pipelines);
    if (refused !== undefined) throw refused;
  }
  return new Group(pipelines, together);
}
