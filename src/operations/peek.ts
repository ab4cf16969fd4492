// `peek`: the decision `limit` would give, taking nothing.

import type { Limiter } from '../types.js';
import { checkUnits } from './checks.js';
import { COUNTS_NOTHING, DECISION, type OperationEntry, wire } from './entry.js';
import type { OperationRunner } from './runner.js';

const WIRE = wire('1', 0, 0);

export const PEEK: OperationEntry = {
  ...DECISION,
  ...WIRE,
  amountOption: 'cost',
  checkAmount: checkUnits,
  takes: false,
  undo: undefined,
  denyCache: 'lookup',
  readsDenial: true,
  // A look takes nothing: not a decision, only the store's time.
  counts: COUNTS_NOTHING,
  atomic: true,
};

/** `limiter.peek(identifier, options?)`. */
export function peekMethod(runner: OperationRunner): Limiter['peek'] {
  return (identifier, options) => runner.call('peek', identifier, options?.cost ?? 1, options);
}
