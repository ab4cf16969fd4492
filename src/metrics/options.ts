// The options every recorder shares, validated in one place.
import { invalidOption } from '../errors.js';
import { knownKeys, optionsObject } from '../validate.js';

/** The defaults of the recorders' options. */
export const METRICS_DEFAULTS = { hotIdentifiers: 20, hotWindowMs: 300_000 } as const;

/** Most identifiers a sketch may keep per limiter: a top list longer than this is no longer "top". */
const MAX_HOT_IDENTIFIERS = 1000;

/** The longest `hotWindowMs`: what a Node.js timer can wait. */
const MAX_HOT_WINDOW_MS = 2 ** 31 - 1;

/** What every recorder is made with, resolved. */
export interface HotOptions {
  readonly hotIdentifiers: number;
  readonly hotWindowMs: number;
}

/** Checks a recorder's options object against its known keys; returns it with the hot options resolved. */
export function resolveMetricsOptions(
  factory: string,
  options: unknown,
  known: readonly string[],
  required: boolean,
): { raw: Record<string, unknown>; hot: HotOptions } {
  const raw = optionsObject(`${factory} options`, options, required);
  knownKeys(factory, raw, ['hotIdentifiers', 'hotWindowMs', ...known]);
  const value = raw.hotIdentifiers ?? METRICS_DEFAULTS.hotIdentifiers;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > MAX_HOT_IDENTIFIERS) {
    throw invalidOption('hotIdentifiers', `a whole number from 0 to ${MAX_HOT_IDENTIFIERS}`, value);
  }
  const windowMs = raw.hotWindowMs ?? METRICS_DEFAULTS.hotWindowMs;
  if (
    typeof windowMs !== 'number' ||
    !Number.isSafeInteger(windowMs) ||
    windowMs < 0 ||
    windowMs > MAX_HOT_WINDOW_MS
  ) {
    throw invalidOption(
      'hotWindowMs',
      `a whole number of milliseconds from 0 (count since the start) to ${MAX_HOT_WINDOW_MS}`,
      windowMs,
    );
  }
  return { raw, hot: { hotIdentifiers: value, hotWindowMs: windowMs } };
}
