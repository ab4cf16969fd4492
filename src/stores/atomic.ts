// What one script may decide together, checked before a group is handed to any store: nothing is written for a refusal.
import { ERROR_CODES, SluiceError } from '../errors.js';
import { OPERATIONS } from '../operations.js';
import type { StoreRequest } from '../types.js';
import { keySlot } from './redis/slot.js';

/**
 * The error for requests that cannot be decided together, or undefined. On Redis Cluster a
 * script's keys must share a slot; the check runs on every store, single node and memory included,
 * so that a combination that passes in development cannot fail with CROSSSLOT in production.
 */
export function atomicRequestsError(
  requests: readonly StoreRequest[],
  keys: readonly string[],
): SluiceError | undefined {
  const first = requests[0];
  const firstKey = keys[0];
  if (first === undefined || firstKey === undefined) return undefined;
  if (!OPERATIONS[first.operation].atomic) {
    return new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected the operation of an atomic check to be 'limit' or 'peek', got ${JSON.stringify(first.operation)}.`,
    );
  }
  const slot = keySlot(firstKey);
  const seen = new Set<string>();
  for (let i = 0; i < requests.length; i++) {
    const request = requests[i] as StoreRequest;
    const key = keys[i] as string;
    if (request.operation !== first.operation || request.now !== first.now) {
      return new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        'Expected every request of an atomic check to have the same operation and the same `now`.',
      );
    }
    if (seen.has(key)) {
      return new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        `Expected the keys of an atomic check to be distinct, got ${JSON.stringify(key)} twice: two limiters with one name on one store share their state.`,
      );
    }
    seen.add(key);
    const other = keySlot(key);
    if (other !== slot) {
      return new SluiceError(
        ERROR_CODES.CROSS_SLOT,
        `Expected the keys of an atomic check to share a cluster slot, got ${JSON.stringify(firstKey)} (slot ${slot}) and ${JSON.stringify(key)} (slot ${other}). Give the call a shared \`tag\` (e.g. { tag: 'tenant:9' }), or combine the limiters with all(limiters, { atomic: false }) to check them one by one and refund on denial.`,
      );
    }
  }
  return undefined;
}
