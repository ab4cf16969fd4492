// `limit`: takes `cost` units if they are all there; a refusal takes nothing. Remembered denials answer it.

import type { Limiter } from '../types.js';
import { checkUnits } from './checks.js';
import { COUNTS_DECISION, DECISION, type OperationEntry, wire } from './entry.js';
import { ACQUIRE } from './leases.js';
import type { OperationRunner } from './runner.js';

const WIRE = wire('0', 0, 0);

export const LIMIT: OperationEntry = {
  ...DECISION,
  ...WIRE,
  amountOption: 'cost',
  checkAmount: checkUnits,
  takes: true,
  undo: 'refund',
  denyCache: 'lookup',
  readsDenial: true,
  counts: COUNTS_DECISION,
  atomic: true,
  // A concurrency policy's `limit` is a lease's acquisition, an operation of its own.
  underLease: ACQUIRE,
};

/** `limiter.limit(identifier, options?)`: a lease policy's acquisition too (LIMIT.underLease). */
export function limitMethod(runner: OperationRunner): Limiter['limit'] {
  return (identifier, options) => runner.call('limit', identifier, options?.cost ?? 1, options);
}
