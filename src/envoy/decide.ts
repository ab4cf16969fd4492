// Decides a request's descriptors together: when one is over, nothing is taken from the others.
import { all, type CombinedLimiter } from '../combine.js';
import type { Limiter } from '../limiter.js';
import type { Decision } from '../types.js';

/** One descriptor's part of a call: whose quota, on which limiter, for how many hits. */
export interface Member {
  readonly limiter: Limiter;
  readonly identifier: string;
  readonly cost: number;
  /** A per-call limit (a descriptor's override); undefined for the limiter's own. */
  readonly limit: number | undefined;
}

/** The options of one member's call. */
export function callOptions(
  member: Member,
  tag: string | undefined,
): { cost: number; limit?: number; tag?: string } {
  return {
    cost: member.cost,
    ...(member.limit === undefined ? {} : { limit: member.limit }),
    ...(tag === undefined ? {} : { tag }),
  };
}

/** The most combinations of limiters kept per config load (each is a small object). */
const MAX_COMBINATIONS = 1000;

/**
 * How members are decided together. With a `tag` (stores of one shard: memory, one Redis, Sentinel),
 * every key of a domain shares one hash slot, so one atomic script decides the whole request. On a
 * Redis Cluster (`tag` undefined) keys are spread by identifier and members are decided side by side,
 * with what was granted refunded when one is over.
 */
export class Together {
  readonly #atomic: boolean;
  readonly #combinations = new Map<string, CombinedLimiter>();
  readonly #ids = new WeakMap<Limiter, number>();
  #nextId = 0;

  constructor(atomic: boolean) {
    this.#atomic = atomic;
  }

  /**
   * The members' decisions, in order, and whether the request passes. Units are taken only when
   * every member allows.
   */
  async decide(members: readonly Member[], tag: string | undefined): Promise<readonly Decision[]> {
    const first = members[0] as Member;
    if (members.length === 1) return [await first.limiter.limit(first.identifier, callOptions(first, tag))];
    // all() takes each name once: two members on one rule (the same rule matched twice) cannot share it.
    const distinct = new Set(members.map((member) => member.limiter.name)).size === members.length;
    if (!distinct) return sideBySide(members, tag);
    const decision = await this.#combination(members).limit(
      members.map((member) => member.identifier),
      {
        cost: members.map((member) => member.cost),
        limit: members.map((member) => member.limit),
        ...(tag === undefined ? {} : { tag }),
      },
    );
    return decision.decisions;
  }

  /** all() over these limiters, made once per combination (and per config load, as the limiters are). */
  #combination(members: readonly Member[]): CombinedLimiter {
    let key = '';
    for (const member of members) {
      let id = this.#ids.get(member.limiter);
      if (id === undefined) {
        id = this.#nextId++;
        this.#ids.set(member.limiter, id);
      }
      key += `${id},`;
    }
    let combined = this.#combinations.get(key);
    if (combined === undefined) {
      combined = all(
        members.map((member) => member.limiter),
        { atomic: this.#atomic },
      );
      if (this.#combinations.size >= MAX_COMBINATIONS) this.#combinations.clear();
      this.#combinations.set(key, combined);
    }
    return combined;
  }
}

/**
 * Members that one all() cannot take (one rule matched twice in a request): each decides on its
 * own, and when one is over, the others' grants are refunded.
 */
async function sideBySide(members: readonly Member[], tag: string | undefined): Promise<readonly Decision[]> {
  const decisions = await Promise.all(
    members.map((member) => member.limiter.limit(member.identifier, callOptions(member, tag))),
  );
  if (decisions.every((decision) => decision.allowed)) return decisions;
  return Promise.all(
    decisions.map(async (decision, i) => {
      // A decision with a reason (a failure policy's) took nothing from the store: nothing to give back.
      if (!decision.allowed || decision.reason !== undefined) return decision;
      const member = members[i] as Member;
      try {
        const refunded = await member.limiter.refund(member.identifier, member.cost, {
          ...(member.limit === undefined ? {} : { limit: member.limit }),
          ...(tag === undefined ? {} : { tag }),
        });
        return { ...decision, remaining: refunded.remaining, resetMs: refunded.resetMs };
      } catch {
        return decision;
      }
    }),
  );
}
