// Reads what the fixed window script stores, for suites that check Redis's own count.

/**
 * The count in a fixed window value: one integer, index × 2^21 + count, or the text
 * "<index>:<count>" when the index or the limit does not fit (see src/algorithms/fixed-window.lua).
 */
export function fixedWindowCount(stored: unknown): number {
  const text = String(stored);
  const colon = text.indexOf(':');
  if (colon !== -1) return Number(text.slice(colon + 1));
  return Number(BigInt(text) % 2n ** 21n);
}
