// The decision a store's result makes: the policy's limit added, and what the result's fields say.

import { withFields } from '../copy.js';
import { OPERATIONS } from '../operations.js';
import type { Decision, StoreRequest, StoreResult } from '../types.js';
import { withLeaseFields } from './leases.js';

/** The decision a store's result makes for a request, under its policy's `limit`, with what its fields say. */
export function decisionOf(result: StoreResult, request: StoreRequest): Decision {
  const decision: Decision = {
    allowed: result.allowed,
    limit: request.policy.limit,
    remaining: result.remaining,
    resetMs: result.resetMs,
    retryAfterMs: result.retryAfterMs,
  };
  if (result.stored === -1) return withFields(decision, { reason: 'denied' as const });
  const fields = result.fields;
  if (fields === undefined) return decision;
  // An operation that makes its own answer from its fields (a charge's debt), else a lease policy's.
  const answer = OPERATIONS[request.operation].answer;
  return answer === undefined ? withLeaseFields(decision, request, fields) : answer(decision, fields);
}
