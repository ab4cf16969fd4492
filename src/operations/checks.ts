// The checks operations share: units, a policy an operation does not apply to, a policy's refusals.
import { describeValue, ERROR_CODES, SluiceError } from '../errors.js';
import type { Operation, Policy } from '../types.js';

const MAX_IDENTIFIER_BYTES = 1024;

/** Checks an identifier; `option` names it in the message. */
export function checkIdentifier(identifier: unknown, option = 'identifier'): SluiceError | undefined {
  if (typeof identifier !== 'string' || identifier.length === 0) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`${option}\` to be a non-empty string, got ${describeValue(identifier)}.`,
    );
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit: only long strings need measuring.
  if (identifier.length * 3 > MAX_IDENTIFIER_BYTES && Buffer.byteLength(identifier) > MAX_IDENTIFIER_BYTES) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`${option}\` to be at most ${MAX_IDENTIFIER_BYTES} bytes of UTF-8, got ${Buffer.byteLength(identifier)} bytes.`,
    );
  }
  return undefined;
}

/** Units a request may take or give back: a positive safe integer, at most what the policy can ever grant. */
export function checkUnits(option: string, amount: unknown, policy: Policy): SluiceError | undefined {
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 1) {
    return new SluiceError(
      ERROR_CODES.INVALID_COST,
      `Expected \`${option}\` to be a positive integer, got ${describeValue(amount)}.`,
    );
  }
  if (amount > policy.maxCost) {
    return new SluiceError(
      ERROR_CODES.COST_EXCEEDS_LIMIT,
      `Expected \`${option}\` to be at most ${policy.maxCost}, the most ${policy.description} can ever grant, got ${amount} (number).`,
    );
  }
  return undefined;
}

/** Refuses an operation on a policy it does not apply to; `leases` says which policies it needs. */
export function unsupported(operation: Operation, policy: Policy, leases: boolean): SluiceError {
  const why = leases
    ? `${operation}() acts on a concurrency() policy's leases`
    : `a concurrency() policy's slots come back with release(identifier, lease)`;
  return new SluiceError(
    ERROR_CODES.UNSUPPORTED_OPERATION,
    `Expected a policy that ${operation}() applies to, got ${policy.description}: ${why}.`,
  );
}

/** The error of an operation the policy refuses (Policy.refuses), or undefined when it takes it. */
export function refusal(operation: 'charge' | 'reserve', policy: Policy): SluiceError | undefined {
  const why = policy.refuses?.[operation];
  return why === undefined ? undefined : new SluiceError(ERROR_CODES.INVALID_OPTION, why);
}

/**
 * The longest a call may wait for its slot, in ms (`wait()`'s `maxWaitMs`): one hour. Longer waits
 * belong in a job queue; and with it, a GCRA key lives at most this (and a pause) beyond its burst.
 */
export const MAX_WAIT_MS = 3_600_000;

/** The longest pause an upstream's answer may set on an identifier, in ms (`Retry-After` beyond it is cut to it). */
export const MAX_PAUSE_MS = 3_600_000;

/**
 * The settle a refund or a charge carries last, as a decimal integer: a reservation's id, which the
 * store remembers until the window of the state it settled is over, so that the same settle sent
 * again (a retry after a lost reply, another process) changes nothing; `NO_SETTLE` for none.
 */
export const NO_SETTLE = '0';
