// A partial grant (`takeUpTo`) in an algorithm's own terms: look at what is free, then take that much.
import { withFields } from '../copy.js';
import type { Operation, Outcome } from '../types.js';

/**
 * Takes as many units as are free, up to `n`, at least 1, or refuses and takes nothing: a look at
 * one unit (`peek`) says how many are free now, then a `limit` of that many takes them (or, when
 * none is, a `limit` of 1 refuses with the wait for one). The one field is the units granted. Each
 * algorithm's Lua does the same two steps in one script (its `op == '7'` branch), so the two
 * twins agree and the grant is atomic.
 */
export function takeUpTo<S>(
  decide: (operation: Operation, cost: number) => Outcome<S>,
  n: number,
): Outcome<S> {
  const free = decide('peek', 1).remaining;
  const granted = Math.min(free, n);
  const outcome = decide('limit', granted > 0 ? granted : 1);
  return withFields(outcome, { fields: [outcome.allowed ? granted : 0] });
}
