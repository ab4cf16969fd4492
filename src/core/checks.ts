// The checks a call passes before anything is asked of a store: identifier, tag, per-call limit, clock.
import { describeValue, ERROR_CODES, SluiceError } from '../errors.js';
import { checkIdentifier } from '../operations/checks.js';
import type { Policy } from '../types.js';

export { checkIdentifier } from '../operations/checks.js';

/** Checks a call's tag: absent, or a valid identifier (escaped into the key the same way). */
export function checkTag(tag: unknown): SluiceError | undefined {
  return tag === undefined ? undefined : checkIdentifier(tag, 'tag');
}

/** The policy for a call's `limit`: the limiter's own when absent, else its variant, or the error. */
export function policyFor(policy: Policy, limit: unknown, option = 'limit'): Policy | SluiceError {
  if (limit === undefined) return policy;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) {
    return new SluiceError(
      ERROR_CODES.INVALID_LIMIT,
      `Expected \`${option}\` to be a positive integer, got ${describeValue(limit)}.`,
    );
  }
  if (policy.withLimit === undefined) {
    return new SluiceError(
      ERROR_CODES.INVALID_LIMIT,
      `Expected no \`${option}\` for ${policy.description}: the policy does not take a limit per call (it has no withLimit()).`,
    );
  }
  try {
    return policy.withLimit(limit);
  } catch (error) {
    if (error instanceof SluiceError) return error;
    throw error;
  }
}

/** Reads a limiter's clock, validated: milliseconds, `undefined` for the store's clock, or the error. */
export function readClock(clock: (() => number) | undefined): number | SluiceError | undefined {
  if (clock === undefined) return undefined;
  const value = clock();
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    return new SluiceError(
      ERROR_CODES.INVALID_CLOCK,
      `Expected \`clock\` to return a finite number of milliseconds of at least 0, got ${describeValue(value)}.`,
    );
  }
  return value;
}
