// all(): several limiters decided as one; atomically by one script when they share a store and a slot.
import { type CombinedDecision, combineDecisions, member } from './combined-decision.js';
import { describeValue, ERROR_CODES, invalidOption, SluiceError } from './errors.js';
import {
  type CallOptions,
  checkCost,
  checkIdentifier,
  checkTag,
  internalsOf,
  isLimiter,
  type KeyOptions,
  type Limiter,
  type LimiterInternals,
  readClock,
} from './limiter.js';
import { atomicRequestsError } from './stores/atomic.js';
import type { Decision, Operation, StoreRequest } from './types.js';
import { knownKeys, optionsObject } from './validate.js';

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
}

/** Identifiers for a combined call: one for every limiter, or one per limiter in order. */
export type Identifiers = string | readonly string[];

/** Several limiters used as one. */
export interface CombinedLimiter {
  readonly limiters: readonly Limiter[];
  /** Whether checks are made by one atomic script (see {@link AllOptions.atomic}). */
  readonly atomic: boolean;
  /** Takes `cost` from every limiter when every one allows; a denial takes nothing from any. */
  limit(identifiers: Identifiers, options?: CallOptions): Promise<CombinedDecision>;
  /** The decision `limit` would give, consuming nothing. */
  peek(identifiers: Identifiers, options?: CallOptions): Promise<CombinedDecision>;
  /** Gives `amount` back to every limiter (each on its own; a refund needs no atomicity). */
  refund(identifiers: Identifiers, amount?: number, options?: KeyOptions): Promise<CombinedDecision>;
  /** Forgets the identifiers in every limiter. */
  reset(identifiers: Identifiers, options?: KeyOptions): Promise<void>;
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
  if (!Array.isArray(limiters) || limiters.length === 0) {
    throw invalidOption('limiters', 'a non-empty array of limiters', limiters);
  }
  limiters.forEach((limiter, i) => {
    if (!isLimiter(limiter)) throw invalidOption(`limiters[${i}]`, 'a limiter from createLimiter()', limiter);
  });
  const list: readonly Limiter[] = Object.freeze([...limiters]);
  const raw = optionsObject('all options', options, false);
  knownKeys('all', raw, ['atomic']);
  if (raw.atomic !== undefined && typeof raw.atomic !== 'boolean') {
    throw invalidOption('all.atomic', 'a boolean', raw.atomic);
  }
  const store = (list[0] as Limiter).store;
  const sameStore = list.every((limiter) => limiter.store === store);
  list.forEach((limiter, i) => {
    const twin = list.findIndex((other) => other.store === limiter.store && other.name === limiter.name);
    if (twin !== i) {
      throw invalidOption(
        `limiters[${i}].name`,
        `distinct from limiters[${twin}].name on the same store (two limiters with one name share their keys)`,
        limiter.name,
      );
    }
  });
  const atomic = raw.atomic ?? sameStore;
  let clock: (() => number) | undefined;
  let internals: LimiterInternals[] = [];
  if (atomic) {
    if (!sameStore) {
      throw new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        'Expected the limiters of all(limiters, { atomic: true }) to share one store: limiters on different stores cannot be decided by one script. Use { atomic: false } to decide them side by side, with grants refunded when one denies.',
      );
    }
    if (typeof store.decideAll !== 'function') {
      throw new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        `Expected the store of all(limiters, { atomic: true }) to offer decideAll(), got a ${describeValue(store.kind)} store without it. Use { atomic: false }.`,
      );
    }
    internals = list.map((limiter, i) => {
      const found = internalsOf(limiter);
      if (found === undefined) {
        throw invalidOption(
          `limiters[${i}]`,
          'a limiter from createLimiter() (atomic checks need its clock and failure policy)',
          limiter,
        );
      }
      return found;
    });
    clock = internals[0]?.clock;
    if (!internals.every((found) => found.clock === clock)) {
      throw new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        'Expected the limiters of an atomic all() to share one `clock` (or none): one script decides every key at one time.',
      );
    }
  }

  function identifiersOf(identifiers: Identifiers): readonly string[] | SluiceError {
    if (typeof identifiers === 'string') return list.map(() => identifiers);
    if (!Array.isArray(identifiers) || identifiers.length !== list.length) {
      return new SluiceError(
        ERROR_CODES.INVALID_IDENTIFIER,
        `Expected \`identifiers\` to be a string or an array of ${list.length} strings (one per limiter), got ${Array.isArray(identifiers) ? `an array of ${identifiers.length}` : describeValue(identifiers)}.`,
      );
    }
    return identifiers;
  }

  function atomicCheck(operation: Operation, ids: readonly string[], cost: number, tag: string | undefined) {
    const decideAll = store.decideAll as NonNullable<typeof store.decideAll>;
    const now = readClock(clock);
    if (now instanceof SluiceError) return Promise.reject(now);
    const requests: StoreRequest[] = list.map((limiter, i) => ({
      policy: limiter.policy,
      name: limiter.name,
      identifier: ids[i] as string,
      tag,
      operation,
      cost,
      now,
    }));
    const combine = (decisions: Decision[]) => {
      const members = decisions.map((decision, i) => member(list[i] as Limiter, decision));
      return combineDecisions(
        members,
        members.every((d) => d.allowed),
      );
    };
    // A combination the store would refuse (keys on several slots, a repeated key) is the caller's
    // mistake, not an outage: refused here, before any failure policy could answer for it.
    const refused = atomicRequestsError(
      requests,
      requests.map((request) => store.keyFor(request.name, request.identifier, request.tag)),
    );
    if (refused !== undefined) return Promise.reject(refused);
    // Each limiter keeps its own failure policy: while one's store is being probed after a failure,
    // every member decides without the store; otherwise one script asks for all, within the first
    // limiter's deadline, and a failure or timeout is decided by each member's `onStoreError`.
    const admitted = internals.map((inner) => inner.admit());
    const probes = admitted.map((admission) => admission === 'probe');
    if (admitted.includes('skip')) {
      return Promise.resolve(
        combine(
          internals.map((inner, i) =>
            inner.unanswered(requests[i] as StoreRequest, 'skipped', undefined, probes[i] === true),
          ),
        ),
      );
    }
    const starts = internals.map((inner, i) => inner.begin(requests[i] as StoreRequest));
    const unanswered = (reason: 'store-error' | 'timeout', error: unknown) =>
      combine(
        internals.map((inner, i) =>
          inner.unanswered(requests[i] as StoreRequest, reason, error, probes[i] === true),
        ),
      );
    return new Promise<CombinedDecision>((resolve) => {
      (internals[0] as LimiterInternals).deadlines.race(
        () => decideAll.call(store, requests),
        (results) =>
          resolve(
            combine(
              results.map((result, i) =>
                (internals[i] as LimiterInternals).answered(
                  requests[i] as StoreRequest,
                  result,
                  probes[i] === true,
                  starts[i] as { startedAt: number; epoch: number },
                ),
              ),
            ),
          ),
        (error) => resolve(unanswered('store-error', error)),
        () => resolve(unanswered('timeout', undefined)),
      );
    });
  }

  async function sideBySideLimit(ids: readonly string[], options: CallOptions): Promise<CombinedDecision> {
    const settled = await Promise.allSettled(
      list.map((limiter, i) => limiter.limit(ids[i] as string, options)),
    );
    const failure = settled.find((outcome) => outcome.status === 'rejected');
    const granted = settled.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : undefined));
    const denied =
      failure !== undefined || granted.some((decision) => decision !== undefined && !decision.allowed);
    if (!denied) {
      return combineDecisions(
        granted.map((decision, i) => member(list[i] as Limiter, decision as Decision)),
        true,
      );
    }
    // Give back what was granted. Only grants the store made as usual: a decision with a `reason`
    // (a fallback) took nothing there. A refund that fails leaves units taken until they expire,
    // which errs on the strict side.
    const cost = options.cost ?? 1;
    const keyOptions: KeyOptions = options.tag === undefined ? {} : { tag: options.tag };
    const after = await Promise.all(
      granted.map(async (decision, i) => {
        const limiter = list[i] as Limiter;
        if (decision === undefined || !decision.allowed || decision.reason !== undefined) return decision;
        try {
          const refunded = await limiter.refund(ids[i] as string, cost, keyOptions);
          return { ...decision, remaining: refunded.remaining, resetMs: refunded.resetMs };
        } catch {
          return decision;
        }
      }),
    );
    if (failure !== undefined) throw (failure as PromiseRejectedResult).reason;
    return combineDecisions(
      after.map((decision, i) => member(list[i] as Limiter, decision as Decision)),
      false,
    );
  }

  async function sideBySidePeek(ids: readonly string[], options: CallOptions): Promise<CombinedDecision> {
    const decisions = await Promise.all(list.map((limiter, i) => limiter.peek(ids[i] as string, options)));
    const members = decisions.map((decision, i) => member(list[i] as Limiter, decision));
    return combineDecisions(
      members,
      members.every((d) => d.allowed),
    );
  }

  function check(operation: 'limit' | 'peek', identifiers: Identifiers, options: CallOptions | undefined) {
    const ids = identifiersOf(identifiers);
    if (ids instanceof SluiceError) return Promise.reject(ids);
    const cost = options?.cost ?? 1;
    const tag = options?.tag;
    // Validate every part first: a bad call writes nothing anywhere.
    for (let i = 0; i < list.length; i++) {
      const limiter = list[i] as Limiter;
      const invalid = checkIdentifier(ids[i]) ?? checkCost('cost', cost, limiter.policy) ?? checkTag(tag);
      if (invalid !== undefined) return Promise.reject(invalid);
    }
    if (atomic) return atomicCheck(operation, ids, cost, tag);
    const callOptions: CallOptions = tag === undefined ? { cost } : { cost, tag };
    return operation === 'limit' ? sideBySideLimit(ids, callOptions) : sideBySidePeek(ids, callOptions);
  }

  return {
    limiters: list,
    atomic,
    limit: (identifiers, options) => check('limit', identifiers, options),
    peek: (identifiers, options) => check('peek', identifiers, options),
    refund: async (identifiers, amount = 1, options) => {
      const ids = identifiersOf(identifiers);
      if (ids instanceof SluiceError) throw ids;
      for (let i = 0; i < list.length; i++) {
        const limiter = list[i] as Limiter;
        const invalid =
          checkIdentifier(ids[i]) ?? checkCost('amount', amount, limiter.policy) ?? checkTag(options?.tag);
        if (invalid !== undefined) throw invalid;
      }
      const decisions = await Promise.all(
        list.map((limiter, i) => limiter.refund(ids[i] as string, amount, options)),
      );
      return combineDecisions(
        decisions.map((decision, i) => member(list[i] as Limiter, decision)),
        true,
      );
    },
    reset: async (identifiers, options) => {
      const ids = identifiersOf(identifiers);
      if (ids instanceof SluiceError) throw ids;
      for (const id of ids) {
        const invalid = checkIdentifier(id) ?? checkTag(options?.tag);
        if (invalid !== undefined) throw invalid;
      }
      await Promise.all(list.map((limiter, i) => limiter.reset(ids[i] as string, options)));
    },
  };
}
