// The fallback store: an in-process MemoryStore of the limiter's own policy, deciding while its store fails.
import { withFields } from '../copy.js';
import { MemoryStore } from '../stores/memory.js';
import type { Decision, StoreRequest } from '../types.js';
import { decisionOf } from './result.js';

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
    return withFields(decisionOf(this.#store.decideNow(request), request), { reason: 'fallback' as const });
  }

  /**
   * Decides a request that gives back what a fallback decision took (a refund, a lease's release)
   * or renews its lease: its decision, or undefined when the fallback store never decided any.
   */
  giveBack(request: StoreRequest): Decision | undefined {
    const store = this.#store;
    return store === undefined
      ? undefined
      : withFields(decisionOf(store.decideNow(request), request), { reason: 'fallback' as const });
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
