// A limiter on the memory store whose clock the test sets: the twins' properties are checked at chosen instants.
import { createLimiter, type Limiter, MemoryStore, type Policy } from '../../src/index.js';

export interface TimedLimiter {
  readonly limiter: Limiter;
  /** Sets the clock. */
  at(t: number): void;
  readonly now: number;
}

/** A limiter of `policy` in memory, its clock starting at 1.7e12 ms. */
export function timed(policy: Policy): TimedLimiter {
  let now = 1_700_000_000_000;
  const limiter = createLimiter({ store: new MemoryStore(), policy, name: 't', clock: () => now });
  return {
    limiter,
    at: (t: number) => {
      now = t;
    },
    get now() {
      return now;
    },
  };
}
