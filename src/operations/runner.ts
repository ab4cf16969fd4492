// What an operation's public method runs on: the one way into a limiter's pipeline for a call.
import type { SluiceError } from '../errors.js';
import type { Decision, Operation, Policy } from '../types.js';

/** The options of one call that the pipeline reads: `tag` and `limit` (CallOptions, KeyOptions). */
export interface CallParts {
  readonly tag?: string | undefined;
  readonly limit?: number | undefined;
}

/**
 * A limiter's pipeline as an operation's method sees it: its policy, and `call`, the core's way in
 * for a call, which checks it by its operation's entry and decides it. `operands`: what the method
 * made and checked (a lease), or why it is refused.
 */
export interface OperationRunner {
  readonly policy: Policy;
  call(
    operation: Operation,
    identifier: string,
    amount: number,
    parts?: CallParts,
    options?: { readonly operands?: readonly string[] | SluiceError | undefined },
  ): Promise<Decision>;
}
