// The fallback store: an in-process MemoryStore of the limiter's own policy, deciding while its store fails.
import { MemoryStore } from '../stores/memory.js';
import type { Decision, StoreRequest } from '../types.js';
import { decisionOf } from './answers.js';

/**
 * Decides with the same policy in this process (`onStoreError: 'fallback'`). Each process then
 * enforces the whole limit on its own share of traffic, until the store answers again.
 */
export class Fallback {
  #store: MemoryStore | undefined;

  /** The fallback store's decision, `reason: 'fallback'`. `request.policy` may be a per-call variant. */
  decide(request: StoreRequest): Decision {
    // Created on the first failure: a limiter whose store never fails never holds one.
    this.#store ??= new MemoryStore({ prefix: 'fallback' });
    const result = this.#store.decideNow(request);
    return { ...decisionOf(result, request.policy.limit, request.operation), reason: 'fallback' };
  }

  /** Decides a request that gives back (a refund of what a fallback decision took); nothing before any. */
  giveBack(request: StoreRequest): void {
    this.#store?.decideNow(request);
  }

  /** Forgets an identifier (on `reset`). */
  forget(name: string, identifier: string, tag: string | undefined): void {
    this.#store?.reset(name, identifier, tag);
  }

  /** Forgets everything: the next outage starts from a full allowance. */
  clear(): void {
    this.#store?.clear();
  }
}
