// The words every other file speaks, by contract: the public API (api/), the algorithm contract
// (algorithms/contract.ts) and the store contract (stores/contract.ts). Re-exports only.
export type * from './algorithms/contract.js';
export type * from './api/decision.js';
export { isStoreFailure } from './api/decision.js';
export type * from './api/limiter.js';
export type * from './api/options.js';
export type * from './stored-types.js';
export type * from './stores/contract.js';
export { STORED_READS } from './stores/contract.js';
