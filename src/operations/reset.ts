// `reset`: forgets an identifier (a DEL: no script); a store failure rejects.
import { COUNTS_NOTHING, type OperationEntry } from './entry.js';

export const RESET: OperationEntry = {
  code: undefined,
  amountOption: 'amount',
  checkAmount: () => undefined,
  takes: false,
  undo: undefined,
  denyCache: 'forget',
  readsDenial: false,
  onStoreFailure: 'reject',
  // It reaches onError only, never a recorder.
  counts: COUNTS_NOTHING,
  atomic: false,
  operands: 0,
  fields: 0,
  wire: '',
};
