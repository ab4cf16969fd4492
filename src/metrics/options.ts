// The options every recorder shares, validated in one place.
import { invalidOption } from '../errors.js';
import { knownKeys, optionsObject } from '../validate.js';

/** The defaults of the recorders' options. */
export const METRICS_DEFAULTS = { hotIdentifiers: 20 } as const;

/** Most identifiers a sketch may keep per limiter: a top list longer than this is no longer "top". */
const MAX_HOT_IDENTIFIERS = 1000;

/** Checks a recorder's options object against its known keys; returns it with `hotIdentifiers` resolved. */
export function resolveMetricsOptions(
  factory: string,
  options: unknown,
  known: readonly string[],
  required: boolean,
): { raw: Record<string, unknown>; hotIdentifiers: number } {
  const raw = optionsObject(`${factory} options`, options, required);
  knownKeys(factory, raw, ['hotIdentifiers', ...known]);
  const value = raw.hotIdentifiers ?? METRICS_DEFAULTS.hotIdentifiers;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > MAX_HOT_IDENTIFIERS) {
    throw invalidOption('hotIdentifiers', `a whole number from 0 to ${MAX_HOT_IDENTIFIERS}`, value);
  }
  return { raw, hotIdentifiers: value };
}
