// `reset`: forgets an identifier (a DEL: no script); a store failure rejects.
import type { OperationEntry } from './entry.js';

export const RESET: OperationEntry = {
  code: undefined,
  amountOption: 'amount',
  checkAmount: () => undefined,
  takes: false,
  undo: undefined,
  denyCache: 'forget',
  readsDenial: false,
  onStoreFailure: 'reject',
  atomic: false,
  operands: 0,
  fields: 0,
  wire: '',
};
