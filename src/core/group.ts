// Several limiters decided as one request: atomically by one script, or side by side; a refused
// request takes nothing from any of them. all(), the HTTP middleware, Envoy and the login guard use it.

import { withFields } from '../copy.js';
import { describeValue, ERROR_CODES, invalidOption, SluiceError } from '../errors.js';
import type { Decision, Operation, Policy } from '../types.js';
import type { Call } from './call.js';
import { extendLease, giveBack } from './follow-up.js';
import { withoutLease } from './leases.js';
import { Pipeline } from './pipeline.js';
import { settleCall } from './reservation.js';
import type { Decided } from './together.js';

/**
 * What a group's check took, each part given back once: when a later check refuses the request, a
 * count mode says so, or (a lease) the request is done.
 */
export class Grant {
  readonly #pipelines: readonly Pipeline[];
  readonly #calls: readonly Call[];
  readonly #decisions: Decision[];
  readonly #taken: readonly boolean[];
  /** Each part's give-back, once started. */
  readonly #given: Array<Promise<void> | undefined>;

  constructor(
    pipelines: readonly Pipeline[],
    calls: readonly Call[],
    decided: Decided,
    taken = decided.taken,
  ) {
    this.#pipelines = pipelines;
    this.#calls = calls;
    this.#decisions = decided.decisions;
    this.#taken = taken;
    this.#given = calls.map(() => undefined);
  }

  /** Whether anything was taken. */
  get empty(): boolean {
    return !this.#taken.includes(true);
  }

  /** Whether a part holds a lease (a concurrency policy's slots), to be released when the request is done. */
  get holdsLeases(): boolean {
    return this.#decisions.some((decision, i) => this.#taken[i] === true && decision.lease !== undefined);
  }

  /** The shortest `leaseMs` among the leases taken (Infinity when none is). */
  get shortestLeaseMs(): number {
    let shortest = Number.POSITIVE_INFINITY;
    this.#calls.forEach((call, i) => {
      const leaseMs = call.policy.leaseMs;
      if (this.#taken[i] === true && leaseMs !== undefined && leaseMs < shortest) shortest = leaseMs;
    });
    return shortest;
  }

  /**
   * Gives back what was taken, where it was taken (the store, or the fallback store), each part
   * once. The decisions then say what is left after the refund. A refund that fails leaves the
   * units taken until they expire: the strict side.
   */
  refund(): Promise<void> {
    return this.#giveBack(() => true);
  }

  /** Releases the leases taken (each once), and nothing else: the request is done with its slots. */
  release(): Promise<void> {
    return this.#giveBack((decision) => decision.lease !== undefined);
  }

  /**
   * Renews every lease still held, each from now for its policy's `leaseMs` (a response that runs
   * long). Resolves to false once none is held any more (released, or lapsed before it was renewed).
   */
  async extend(): Promise<boolean> {
    const renewals = this.#calls.map(async (call, i) => {
      const decision = this.#decisions[i] as Decision;
      if (this.#given[i] !== undefined || this.#taken[i] !== true || decision.lease === undefined)
        return false;
      const lease = decision.lease;
      const after = await extendLease(this.#pipelines[i] as Pipeline, call, withFields(decision, { lease }));
      return after?.extended === true;
    });
    return (await Promise.all(renewals)).includes(true);
  }

  #giveBack(which: (decision: Decision) => boolean): Promise<void> {
    return Promise.all(
      this.#calls.map((call, i) => {
        const decision = this.#decisions[i] as Decision;
        if (this.#taken[i] !== true || !which(decision)) return undefined;
        this.#given[i] ??= giveBack(this.#pipelines[i] as Pipeline, call, decision).then((after) => {
          if (after !== undefined) {
            this.#decisions[i] = withoutLease({
              ...decision,
              remaining: after.remaining,
              resetMs: after.resetMs,
            });
          }
        });
        return this.#given[i];
      }),
    ).then(() => undefined);
  }

  /**
   * Settles what was taken with its actual cost, the same for every limiter (the middleware's
   * `settle`): the difference given back or charged where each was taken, once, instead of a
   * refund. Rejects when a charge is not recorded (the store's error).
   */
  settle(actual: number): Promise<void> {
    return Promise.all(
      this.#calls.map((call, i) => {
        const decision = this.#decisions[i] as Decision;
        // A lease is released when the request ends, not settled.
        if (this.#taken[i] !== true || decision.lease !== undefined) return undefined;
        this.#given[i] ??= settleCall(this.#pipelines[i] as Pipeline, call, decision, actual).then(
          () => undefined,
        );
        return this.#given[i];
      }),
    ).then(() => undefined);
  }
}

/** The outcome of a group's check. */
export interface GroupOutcome {
  /** Whether every limiter allowed (as enforced: shadow limiters never refuse). */
  readonly allowed: boolean;
  /** Each limiter's decision, in order; after a refusal, what each has once given back. */
  readonly decisions: readonly Decision[];
  /** The policy each decision was made under: the limiter's, or its variant for the call's `limit`. */
  readonly policies: readonly Policy[];
  /** What the check took (nothing, when refused); the middleware gives it back in its count modes. */
  readonly grant: Grant;
  /** The store failure behind each decision the failure policy made, in order. */
  readonly errors: readonly (SluiceError | undefined)[];
}

/** One call's parts for each limiter: a value for all, or one per limiter in order. */
export type PerMember<T> = T | readonly T[];

/** Identifiers for a group's call: one for every limiter, or one per limiter in order. */
export type Identifiers = string | readonly string[];

/** The options of a group's call. */
export interface GroupCallOptions {
  readonly cost?: PerMember<number> | undefined;
  readonly limit?: PerMember<number | undefined> | undefined;
  readonly tag?: string | undefined;
}

function part<T>(value: PerMember<T>, i: number): T {
  return Array.isArray(value) ? (value[i] as T) : (value as T);
}

/** The identifiers of a group's call, one per limiter, or the error. */
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

function perMember(option: string, value: unknown, count: number): SluiceError | undefined {
  if (!Array.isArray(value) || value.length === count) return undefined;
  return invalidOption(option, `a value for every limiter, or an array of ${count} (one per limiter)`, value);
}

/**
 * Limiters decided as one. `atomic`: one script over every key (one store; the keys of a call
 * must share a slot). Otherwise each decides on its own and what others took is given back when
 * one refuses; a limiter may then appear more than once (one rule matched by two descriptors).
 * Shadow limiters of an atomic group are decided beside it, so that their verdict can never take
 * units from, or refuse, the limiters that enforce.
 */
export class Group {
  readonly pipelines: readonly Pipeline[];
  readonly atomic: boolean;

  constructor(pipelines: readonly Pipeline[], atomic: boolean) {
    this.pipelines = pipelines;
    this.atomic = atomic;
  }

  /** Checks (`limit`) or looks (`peek`) once for every limiter; rejects before anything is asked when a part is bad. */
  async run(
    operation: Operation,
    identifiers: Identifiers,
    options: GroupCallOptions | undefined,
  ): Promise<GroupOutcome> {
    const count = this.pipelines.length;
    const ids = identifiersFor(count, identifiers);
    if (ids instanceof SluiceError) throw ids;
    const cost = options?.cost ?? 1;
    const limit = options?.limit;
    const tag = options?.tag;
    const shape = perMember('cost', cost, count) ?? perMember('limit', limit, count);
    if (shape !== undefined) throw shape;
    const requests = this.pipelines.map((pipeline, i) => {
      const parts = { tag, limit: part(limit, i) };
      return { pipeline, operation, identifier: ids[i], amount: part(cost, i), parts };
    });
    const decided = await Pipeline.batch(requests, this.atomic);
    const { calls, decisions, errors } = decided;
    const allowed = decisions.every((decision) => decision.allowed);
    const grant = new Grant(this.pipelines, calls, decided, allowed ? decided.taken : calls.map(() => false));
    if (!allowed) await new Grant(this.pipelines, calls, decided).refund();
    const policies = calls.map((call) => call.policy);
    return { allowed, decisions, policies, grant, errors };
  }

  /** Forgets the identifiers in every limiter; rejects with a store's failure. */
  async reset(identifiers: Identifiers, tag: string | undefined): Promise<void> {
    const ids = identifiersFor(this.pipelines.length, identifiers);
    if (ids instanceof SluiceError) throw ids;
    await Promise.all(this.pipelines.map((pipeline, i) => pipeline.reset(ids[i] as string, tag)));
  }
}

/** Refuses an atomic group whose limiters cannot share one script. */
export function atomicGroupError(pipelines: readonly Pipeline[]): SluiceError | undefined {
  const store = pipelines[0]?.store;
  if (!pipelines.every((pipeline) => pipeline.store === store)) {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      'Expected the limiters of all(limiters, { atomic: true }) to share one store: limiters on different stores cannot be decided by one script. Use { atomic: false } to decide them side by side, with grants refunded when one denies.',
    );
  }
  if (store !== undefined && typeof store.submit !== 'function') {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected the store of all(limiters, { atomic: true }) to offer submit(), got a ${JSON.stringify(store.kind)} store without it. Use { atomic: false }.`,
    );
  }
  const clock = pipelines[0]?.clock;
  if (!pipelines.every((pipeline) => pipeline.clock === clock)) {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      'Expected the limiters of an atomic all() to share one `clock` (or none): one script decides every key at one time.',
    );
  }
  return undefined;
}
