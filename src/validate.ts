// Checks shared by every constructor: each returns the value typed, or throws an error that names the option.
import { describeValue, ERROR_CODES, invalidOption, SluiceError } from './errors.js';

/**
 * The most limiters one group decides (an all(), a middleware's array): a request is rarely held
 * to more than a handful of policies, and one atomic script over this many keys holds Redis,
 * which every caller shares, for about a millisecond.
 */
export const MAX_GROUP_SIZE = 64;

/** Refuses a group of more than MAX_GROUP_SIZE limiters, before anything is asked of a store. */
export function groupSize(option: string, count: number): void {
  if (count > MAX_GROUP_SIZE) {
    throw new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected \`${option}\` to hold at most ${MAX_GROUP_SIZE} limiters, got ${count}: one call decides at most ${MAX_GROUP_SIZE} (each its own key in one script).`,
    );
  }
}

/** A positive safe integer, at most `max`. */
export function positiveInteger(option: string, value: unknown, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw invalidOption(option, 'a positive integer', value);
  }
  if (value > max) throw invalidOption(option, `a positive integer of at most ${max}`, value);
  return value;
}

/** A finite number greater than zero. */
export function positiveNumber(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw invalidOption(option, 'a finite number greater than 0', value);
  }
  return value;
}

/** A whole number of milliseconds, at least 1 (and at most about 10 years, beyond which TTLs overflow). */
export function durationMs(option: string, value: unknown): number {
  const max = 315_360_000_000;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > max) {
    throw invalidOption(option, `a whole number of milliseconds from 1 to ${max}`, value);
  }
  return value;
}

/** A string usable inside a key: non-empty, printable, without braces (which would move the hash tag). */
export function keyPart(option: string, value: unknown): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > 128 ||
    !/^[\x21-\x7a|~]+$/.test(value)
  ) {
    throw invalidOption(
      option,
      'a non-empty string of at most 128 printable ASCII characters without spaces or braces',
      value,
    );
  }
  return value;
}

/** An object of options (or undefined when every option has a default). */
export function optionsObject(option: string, value: unknown, required: boolean): Record<string, unknown> {
  if (value === undefined && !required) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidOption(option, 'an options object', value);
  }
  return value as Record<string, unknown>;
}

/** Rejects option names that are not known, so a typo (`windowMS`) is not silently ignored. */
export function knownKeys(option: string, value: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        `Unknown option \`${option}.${key}\` (value ${describeValue(value[key])}); expected one of ${known.map((k) => `\`${k}\``).join(', ')}.`,
      );
    }
  }
}
