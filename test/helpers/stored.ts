// Reads what the fixed window script stores, for suites that check Redis's own count.
import { decodeFixedWindow } from '../../src/stores/redis/stored.js';

/** The count in a stored fixed window value, either form (see src/stores/redis/stored.ts). */
export function fixedWindowCount(stored: unknown): number {
  return decodeFixedWindow(String(stored))?.count ?? Number.NaN;
}
