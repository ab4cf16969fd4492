// The decision a store's result makes: decisionOf lives beside Call (call.ts), which is on every decision's path.
export { decisionOf } from './call.js';
