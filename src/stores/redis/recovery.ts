// After a reply that proves a script did not run (see Unrun): one repair for every call it failed,
// their resends in the order they were first sent, and later calls held until those are sent.

import type { Unrun } from './server-errors.js';

interface Repair {
  readonly reason: Unrun;
  /** Where it repairs: the node that owns the failed call's key. */
  readonly key: string;
  /** The send count when the repair was started: calls sent before it may share it. */
  readonly startedAt: number;
  readonly done: Promise<void>;
}

function ignore(): void {}

/**
 * Keeps per-key order through a repair. A call that failed awaits {@link Recovery.repair}; calls
 * made meanwhile await {@link Recovery.gate}, which opens only after the repair's own waiters have
 * resumed (promise reactions run in the order they were registered), so a resend is never overtaken
 * by a call made after the one it repeats. Commands sent on one connection run in the order sent.
 */
export class Recovery {
  /** The repair under way per node (by `scope`, the node's address when known). */
  readonly #current = new Map<string, Repair>();
  #gate: Promise<void> | undefined;
  readonly #perform: (reason: Unrun, key: string) => Promise<void>;
  readonly #gated: (gate: Promise<void> | undefined) => void;

  /**
   * `perform` repairs the node that owns `key` (loads the scripts or the library there, or waits
   * out a failover). `gated` hears the gate whenever it changes: `undefined` when calls may be sent
   * at once, otherwise a promise they await first. The sender numbers its sends, in the order they
   * reach the client (and so the server, per connection), and keeps the gate: a call that goes
   * straight out enters nothing here.
   */
  constructor(
    perform: (reason: Unrun, key: string) => Promise<void>,
    gated: (gate: Promise<void> | undefined) => void,
  ) {
    this.#perform = perform;
    this.#gated = gated;
  }

  /**
   * Resolves when a call for `key` sent at `sentAt` that failed for `reason` may be sent again;
   * `now` is the next number of the sends, which a repair started now takes. Calls on one node
   * (`scope`) share a repair started after they were sent: one started before ran before their
   * failure, so whatever removed the scripts came after it, and it is started again.
   */
  repair(reason: Unrun, sentAt: number, now: number, key: string, scope: string): Promise<void> {
    const current = this.#current.get(scope);
    if (current !== undefined && current.reason === reason && current.startedAt > sentAt) return current.done;
    const repair: Repair = { reason, key, startedAt: now, done: this.#perform(reason, key) };
    this.#current.set(scope, repair);
    const settled = repair.done.then(ignore, ignore);
    settled.then(() => {
      if (this.#current.get(scope) === repair) this.#current.delete(scope);
    });
    // The gate's waiters are queued only once `settled` resolves, a step after the failed calls'
    // own reactions to `done`: their resends go out first.
    const previous = this.#gate;
    const gate = previous === undefined ? settled : Promise.all([previous, settled]).then(ignore);
    this.#gate = gate;
    this.#gated(gate);
    gate.then(() => {
      if (this.#gate !== gate) return;
      this.#gate = undefined;
      this.#gated(undefined);
    });
    return repair.done;
  }
}
