// The `share` option of every policy: a region's part of a global budget, and how each count is scaled.
import { ERROR_CODES, invalidOption, SluiceError } from './errors.js';

// 100 × 0.29 is 28.999999999999996 in binary floating point; a share written in decimal means 29.
const SLACK = 1e-9;

/** The share of the global budget, from 0 (excluded) to 1; 1 when not given. */
export function resolveShare(option: string, value: unknown): number {
  if (value === undefined) return 1;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > 1) {
    throw invalidOption(option, 'a number greater than 0 and at most 1', value);
  }
  return value;
}

/**
 * A count (a window's limit) scaled down to the share, rounded down so that the regions together
 * never admit more than the global limit. A region left with less than one unit would deny
 * everything: that is refused.
 */
export function scaleLimit(policy: string, option: string, limit: number, share: number): number {
  if (share === 1) return limit;
  const scaled = Math.floor(limit * share + SLACK);
  if (scaled < 1) {
    throw new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected \`${policy}.${option}\` × \`${policy}.share\` to be at least 1, got ${limit} × ${share} = ${limit * share}: a region with no allowance would deny everything. Raise the share or the ${option}.`,
    );
  }
  return scaled;
}

/**
 * A burst (GCRA's `burst`, the bucket's `capacity`) scaled down to the share, rounded down but at
 * least 1: the rate is scaled exactly, so one request at a time, evenly spaced, still keeps the
 * region within its share of the rate.
 */
export function scaleBurst(burst: number, share: number): number {
  if (share === 1) return burst;
  const scaled = Math.floor(burst * share + SLACK);
  return Math.max(scaled, 1);
}

/** `,share=0.25` for a policy's description, nothing for the whole budget. */
export function describeShare(share: number): string {
  return share === 1 ? '' : `,share=${share}`;
}
