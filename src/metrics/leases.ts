// A concurrency limiter's slots in use and its leases that lapsed unreleased, from the decisions this process saw.
import type { Decision } from '../types.js';

/**
 * Identifiers whose slots the gauge follows at once. Beyond it the one seen longest ago is
 * dropped (the gauge then undercounts): about 100 bytes each.
 */
export const MAX_LEASE_IDENTIFIERS = 10_000;

/** One identifier's slots in use as of its last decision, and until when they are held at most. */
interface Held {
  readonly inUse: number;
  readonly untilMs: number;
}

/**
 * Slots in use per concurrency limiter: each identifier's as of the last decision this process
 * saw for it (`limit - remaining`), until its last lease would lapse (`resetMs` later); and the
 * slots of leases that lapsed unreleased, as the calls that freed them reported (`reclaimed`).
 */
export class LeaseTally {
  /** Slots of leases that lapsed unreleased (a crashed or stuck holder). */
  expired = 0;
  readonly #held = new Map<string, Held>();

  /** Counts a decision the store (or the fallback store) made for the limiter. */
  observe(identifier: string, decision: Decision): void {
    if (decision.reclaimed !== undefined) this.expired += decision.reclaimed;
    const held = this.#held;
    // Re-inserted on each decision: the map's order is then the order identifiers were last seen.
    held.delete(identifier);
    const inUse = decision.limit - decision.remaining;
    if (inUse <= 0 || decision.resetMs <= 0) return;
    held.set(identifier, { inUse, untilMs: Date.now() + decision.resetMs });
    if (held.size > MAX_LEASE_IDENTIFIERS) held.delete(held.keys().next().value as string);
  }

  /** Slots in use now, as far as this process knows: identifiers whose leases have all lapsed are dropped. */
  slotsInUse(nowMs = Date.now()): number {
    let total = 0;
    for (const [identifier, held] of this.#held) {
      if (held.untilMs <= nowMs) this.#held.delete(identifier);
      else total += held.inUse;
    }
    return total;
  }
}
