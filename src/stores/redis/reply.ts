// The reply of a batch script: read by wire.ts, beside the arguments that asked for it.
export { answerRecords } from './wire.js';
