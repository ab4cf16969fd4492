// Several limiters decided as one request: atomically by one script, or side by side; a refused
// request takes nothing from any of them. all(), the HTTP middleware and the login guard use it.
import { ERROR_CODES, SluiceError } from '../errors.js';
import { atomicRequestsError } from '../stores/atomic.js';
import type { Decision, Operation } from '../types.js';
import { Call } from './call.js';
import type { Member } from './member.js';
import { consumed, type Decided, decideAtomic, decideOne } from './pipeline.js';

/** What a group's check took, to be given back once: when a later check refuses the request, or a count mode says so. */
export class Grant {
  readonly #calls: readonly Call[];
  readonly #decisions: Decision[];
  readonly #taken: readonly boolean[];
  #given: Promise<void> | undefined;

  constructor(calls: readonly Call[], decisions: Decision[], taken: readonly boolean[]) {
    this.#calls = calls;
    this.#decisions = decisions;
    this.#taken = taken;
  }

  /** Whether anything was taken. */
  get empty(): boolean {
    return !this.#taken.includes(true);
  }

  /**
   * Gives back what was taken, where it was taken (the store, or the fallback store), once. The
   * decisions then say what is left after the refund. A refund that fails leaves the units taken
   * until they expire: the strict side.
   */
  refund(): Promise<void> {
    this.#given ??= Promise.all(
      this.#calls.map(async (call, i) => {
        if (this.#taken[i] !== true) return;
        const decision = this.#decisions[i] as Decision;
        const after = await giveBack(call, decision);
        if (after !== undefined) {
          this.#decisions[i] = { ...decision, remaining: after.remaining, resetMs: after.resetMs };
        }
      }),
    ).then(() => undefined);
    return this.#given;
  }
}

/** Gives back what one call took; the store's answer to the refund, if it made one. */
async function giveBack(call: Call, decision: Decision): Promise<Decision | undefined> {
  const member = call.member;
  if (decision.reason === 'fallback') {
    member.health.refundFallback(call);
    return undefined;
  }
  const now = member.time();
  if (now instanceof SluiceError) return undefined;
  const refund = new Call(member, call.policy, 'refund', call.identifier, call.cost, call.tag, now);
  const answer = await decideOne(refund);
  return answer.reason === undefined ? answer : undefined;
}

/** The outcome of a group's check. */
export interface GroupOutcome {
  /** Whether every member allowed (as enforced: shadow members never refuse). */
  readonly allowed: boolean;
  /** Each member's decision, in order; after a refusal, what each has once given back. */
  readonly decisions: readonly Decision[];
  /** What the check took (nothing, when refused); the middleware gives it back in its count modes. */
  readonly grant: Grant;
  /** The store failure behind each decision the failure policy made, in order. */
  readonly errors: readonly (SluiceError | undefined)[];
}

/** One call's parts for each member: a value for all, or one per member in order. */
export type PerMember<T> = T | readonly T[];

function part<T>(value: PerMember<T>, i: number): T {
  return Array.isArray(value) ? (value[i] as T) : (value as T);
}

/**
 * Limiters decided as one. `atomic`: one script over every key (one store; the keys of a call
 * must share a slot). Otherwise each decides on its own and what others took is given back when
 * one refuses. Shadow members of an atomic group are decided beside it, so that their verdict can
 * never take units from, or refuse, the members that enforce.
 */
export class Group {
  readonly members: readonly Member[];
  readonly atomic: boolean;

  constructor(members: readonly Member[], atomic: boolean) {
    this.members = members;
    this.atomic = atomic;
  }

  /** Makes every member's call, checked; rejects with the first problem, before anything is asked. */
  calls(
    operation: Operation,
    identifiers: readonly string[],
    cost: PerMember<number>,
    limit: PerMember<number | undefined>,
    tag: string | undefined,
  ): Call[] | SluiceError {
    const policies = [];
    for (let i = 0; i < this.members.length; i++) {
      const member = this.members[i] as Member;
      const policy = member.check(identifiers[i], part(cost, i), 'cost', tag, part(limit, i));
      if (policy instanceof SluiceError) return policy;
      policies.push(policy);
    }
    // One script runs at one time: an atomic group reads one clock (its members share it).
    const shared = this.atomic ? (this.members[0] as Member).time() : undefined;
    if (shared instanceof SluiceError) return shared;
    const calls: Call[] = [];
    for (let i = 0; i < this.members.length; i++) {
      const member = this.members[i] as Member;
      const now = this.atomic ? shared : member.time();
      if (now instanceof SluiceError) return now;
      const policy = policies[i] as Call['policy'];
      calls.push(new Call(member, policy, operation, identifiers[i] as string, part(cost, i), tag, now));
    }
    if (this.atomic) {
      const store = (this.members[0] as Member).store;
      const keys = calls.map((call) => store.keyFor(call.name, call.identifier, call.tag));
      // A combination the store would refuse (keys on several slots) is the caller's mistake, not an
      // outage: refused here, before any failure policy could answer for it.
      const refused = atomicRequestsError(calls, keys);
      if (refused !== undefined) return refused;
    }
    return calls;
  }

  /** Checks (`limit`) or looks (`peek`) once for every member; a refused request takes nothing. */
  async decide(calls: readonly Call[]): Promise<GroupOutcome> {
    const { decisions, taken } = await this.#decide(calls);
    const allowed = decisions.every((decision) => decision.allowed);
    const grant = new Grant(calls, decisions, allowed ? taken : calls.map(() => false));
    if (!allowed) await new Grant(calls, decisions, taken).refund();
    return { allowed, decisions, grant, errors: calls.map((call) => call.error) };
  }

  #decide(calls: readonly Call[]): Promise<Decided> | Decided {
    if (!this.atomic) return sideBySide(calls);
    const enforcing = calls.filter((call) => call.member.enforce);
    if (enforcing.length === 0 || enforcing.length === calls.length) return decideAtomic(calls);
    return mixed(calls, enforcing);
  }
}

async function sideBySide(calls: readonly Call[]): Promise<Decided> {
  const decisions = await Promise.all(calls.map(decideOne));
  return {
    decisions,
    taken: decisions.map((decision, i) => calls[i]?.operation === 'limit' && consumed(decision)),
  };
}

/** Enforcing members by one script, shadow members beside them; results back in member order. */
async function mixed(calls: readonly Call[], enforcing: readonly Call[]): Promise<Decided> {
  const shadow = calls.filter((call) => !call.member.enforce);
  const [together, beside] = await Promise.all([decideAtomic(enforcing), sideBySide(shadow)]);
  const decisions: Decision[] = [];
  const taken: boolean[] = [];
  let e = 0;
  let s = 0;
  for (const call of calls) {
    const from = call.member.enforce ? together : beside;
    const at = call.member.enforce ? e++ : s++;
    decisions.push(from.decisions[at] as Decision);
    taken.push(from.taken[at] === true);
  }
  return { decisions, taken };
}

/** Refuses an atomic group whose members cannot share one script. */
export function atomicGroupError(members: readonly Member[]): SluiceError | undefined {
  const store = members[0]?.store;
  if (!members.every((member) => member.store === store)) {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      'Expected the limiters of all(limiters, { atomic: true }) to share one store: limiters on different stores cannot be decided by one script. Use { atomic: false } to decide them side by side, with grants refunded when one denies.',
    );
  }
  if (store !== undefined && typeof store.decideAll !== 'function') {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected the store of all(limiters, { atomic: true }) to offer decideAll(), got a ${JSON.stringify(store.kind)} store without it. Use { atomic: false }.`,
    );
  }
  const clock = members[0]?.clock;
  if (!members.every((member) => member.clock === clock)) {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      'Expected the limiters of an atomic all() to share one `clock` (or none): one script decides every key at one time.',
    );
  }
  return undefined;
}
