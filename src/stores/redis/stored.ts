// Reads back the values the scripts store (src/algorithms/*.lua), for tools and tests that look at
// Redis directly. The scripts are the source of these formats; the storage tests hold both to them.

/** 2^21: a fixed window count packed with its window index stays below it. */
const FIXED_WINDOW_SPAN = 2 ** 21;

/**
 * A fixed window value: one integer, index × 2^21 + count, when both fit; otherwise the text
 * `"<index>:<count>"`. Returns undefined for anything else.
 */
export function decodeFixedWindow(
  value: string,
): { readonly index: number; readonly count: number } | undefined {
  const text = /^(\d+):(\d+)$/.exec(value);
  if (text !== null) return { index: Number(text[1]), count: Number(text[2]) };
  if (!/^\d+$/.test(value)) return undefined;
  const packed = BigInt(value);
  const span = BigInt(FIXED_WINDOW_SPAN);
  return { index: Number(packed / span), count: Number(packed % span) };
}

/** 2^52: on the server's clock a GCRA TAT of whole µs is kept as minus (2^52 + the µs). */
const GCRA_DUE = 2 ** 52;

/**
 * The most a GCRA key kept in that form outlives its TAT: it expires at the next whole second of
 * Redis's clock (gcra.lua).
 */
export const GCRA_EXPIRY_ROUNDING_MS = 1000;

/**
 * A GCRA or token bucket value, the theoretical arrival time in ms: minus (2^52 + a whole number of
 * microseconds) when written on the server's clock (the key then expires at the first whole second at or
 * after the TAT), minus a whole number of microseconds (`"-1764681234567123"`, the key expires at the
 * TAT), or the decimal itself. Returns undefined for anything else.
 */
export function decodeTat(value: string): number | undefined {
  if (!/^-?\d+(\.\d+)?(e[+-]?\d+)?$/i.test(value)) return undefined;
  const number = Number(value);
  if (number < -GCRA_DUE) return (-number - GCRA_DUE) / 1000;
  return number < 0 ? -number / 1000 : number;
}

/**
 * A GCRA or token bucket value with the pause an upstream asked for, while one holds:
 * `"<tat> <paused until, ms> <shift, ms>"` (see gcra.lua); the TAT alone otherwise. `graceMs`: how
 * long after its TAT the key may still be there (under a second for a TAT alone written on the
 * server's clock, which expires at the next whole second; none for the other forms).
 */
export function decodeGcra(value: string):
  | {
      readonly tat: number;
      readonly graceMs: number;
      readonly pausedUntil?: number;
      readonly shiftMs?: number;
    }
  | undefined {
  const paused = /^(\S+) (\d+) (\d+)$/.exec(value);
  const tat = decodeTat(paused === null ? value : (paused[1] as string));
  if (tat === undefined) return undefined;
  if (paused === null) return { tat, graceMs: Number(value) < -GCRA_DUE ? GCRA_EXPIRY_ROUNDING_MS : 0 };
  return { tat, graceMs: 0, pausedUntil: Number(paused[2]), shiftMs: Number(paused[3]) };
}
