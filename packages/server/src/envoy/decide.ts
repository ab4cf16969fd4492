// Decides a request's descriptors together: when one is over, nothing is taken from the others.

import type { Decision, Limiter } from 'sluice';
import { type Group, groupFor } from 'sluice/internal';

/** One descriptor's part of a call: whose quota, on which limiter, for how many hits. */
export interface DescriptorCall {
  readonly limiter: Limiter;
  readonly identifier: string;
  readonly cost: number;
  /** A per-call limit (a descriptor's override); undefined for the limiter's own. */
  readonly limit: number | undefined;
}

/** The options of one descriptor's call. */
export function callOptions(
  call: DescriptorCall,
  tag: string | undefined,
): { cost: number; limit?: number; tag?: string } {
  // One literal per shape: spreading optional parts would make two objects more on every call.
  const { cost, limit } = call;
  if (limit === undefined) return tag === undefined ? { cost } : { cost, tag };
  return tag === undefined ? { cost, limit } : { cost, limit, tag };
}

/** A lone call's decision as the list `decide` answers. */
const alone = (decision: Decision): readonly Decision[] => [decision];
/** A group's decisions. */
const decisionsOf = (outcome: { readonly decisions: readonly Decision[] }): readonly Decision[] =>
  outcome.decisions;

/** The most combinations of limiters kept per config load (each is a small object). */
const MAX_COMBINATIONS = 1000;

/**
 * How descriptors are decided together, as one group of the core. With a `tag` (stores of one
 * shard: memory, one Redis, Sentinel), every key of a domain shares one hash slot, so one atomic
 * script decides the whole request. On a Redis Cluster (`tag` undefined) keys are spread by
 * identifier and the calls are decided side by side, with what was granted (by the store or the
 * fallback store) given back when one is over; so are calls of one rule matched by two descriptors.
 */
export class Together {
  readonly #atomic: boolean;
  readonly #groups = new Map<string, Group>();
  readonly #ids = new WeakMap<Limiter, number>();
  #nextId = 0;

  constructor(atomic: boolean) {
    this.#atomic = atomic;
  }

  /**
   * The calls' decisions, in order, and whether the request passes. Units are taken only when
   * every call is allowed. Not an async function: on the usual path the store's promise is the
   * only one awaited, and a request's decision passes through no frame of its own.
   */
  decide(calls: readonly DescriptorCall[], tag: string | undefined): Promise<readonly Decision[]> {
    const first = calls[0] as DescriptorCall;
    if (calls.length === 1) return first.limiter.limit(first.identifier, callOptions(first, tag)).then(alone);
    return this.#group(calls)
      .run(
        'limit',
        calls.map((call) => call.identifier),
        { cost: calls.map((call) => call.cost), limit: calls.map((call) => call.limit), tag },
      )
      .then(decisionsOf);
  }

  /** The group of these limiters, made once per combination (and per config load, as the limiters are). */
  #group(calls: readonly DescriptorCall[]): Group {
    let key = '';
    for (const call of calls) {
      let id = this.#ids.get(call.limiter);
      if (id === undefined) {
        id = this.#nextId++;
        this.#ids.set(call.limiter, id);
      }
      key += `${id},`;
    }
    let group = this.#groups.get(key);
    if (group === undefined) {
      const limiters = calls.map((call) => call.limiter);
      // One rule matched twice (one limiter, two identifiers) is decided side by side, as on a cluster.
      const repeated = new Set(limiters).size < limiters.length;
      group = groupFor(limiters, { atomic: this.#atomic && !repeated, repeats: true });
      if (this.#groups.size >= MAX_COMBINATIONS) this.#groups.clear();
      this.#groups.set(key, group);
    }
    return group;
  }
}
