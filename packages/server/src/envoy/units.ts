// Envoy's time units: their lengths, their numbers on the wire, and the `window` durations sluice adds.

/** The units of envoyproxy/ratelimit's config, as upper-case names. */
export type UnitName = 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'WEEK' | 'MONTH' | 'YEAR';

/** Each unit's length in ms, as the reference service counts them (a month is 30 days, a year 365). */
export const UNIT_MS: Readonly<Record<UnitName, number>> = {
  SECOND: 1000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: 86_400_000,
  WEEK: 604_800_000,
  MONTH: 2_592_000_000,
  YEAR: 31_536_000_000,
};

/** `RateLimitResponse.RateLimit.Unit` numbers (the response's enum, which has WEEK = 7). */
export const RESPONSE_UNIT: Readonly<Record<UnitName, number>> = {
  SECOND: 1,
  MINUTE: 2,
  HOUR: 3,
  DAY: 4,
  MONTH: 5,
  YEAR: 6,
  WEEK: 7,
};

/** `envoy.type.v3.RateLimitUnit` numbers, the unit of a descriptor's limit override (no WEEK). */
const OVERRIDE_UNITS: readonly (UnitName | undefined)[] = [
  undefined,
  'SECOND',
  'MINUTE',
  'HOUR',
  'DAY',
  'MONTH',
  'YEAR',
];

/** The unit of an override's enum number, or undefined for UNKNOWN and numbers Envoy does not send. */
export function overrideUnit(value: number): UnitName | undefined {
  return OVERRIDE_UNITS[value];
}

/** A config's unit name, case-insensitive as the reference reads it, or undefined when unknown. */
export function parseUnit(text: string): UnitName | undefined {
  const upper = text.toUpperCase();
  return Object.hasOwn(UNIT_MS, upper) ? (upper as UnitName) : undefined;
}

/** The unit whose length is exactly `windowMs`, so a `window: 60s` rule still reports MINUTE. */
export function unitOfWindow(windowMs: number): UnitName | undefined {
  for (const [name, ms] of Object.entries(UNIT_MS)) if (ms === windowMs) return name as UnitName;
  return undefined;
}

const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/** The longest window: about ten years, beyond which TTLs overflow. */
export const MAX_WINDOW_MS = 315_360_000_000;

/**
 * A `window:` duration such as `90s`, `1m30s`, `500ms`, `2h` or `7d`, in whole milliseconds; undefined
 * when the text is not one. A bare number is refused: the unit would be a guess.
 */
export function parseWindow(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h|d|w))+$/.test(trimmed)) return undefined;
  let ms = 0;
  for (const [, amount, , unit] of trimmed.matchAll(/(\d+(\.\d+)?)(ms|s|m|h|d|w)/g)) {
    ms += Number(amount) * (DURATION_UNITS[unit as string] as number);
  }
  ms = Math.round(ms);
  return Number.isSafeInteger(ms) && ms >= 1 && ms <= MAX_WINDOW_MS ? ms : undefined;
}
