// Clock-aligned windows (fixedWindow, slidingWindow) start at multiples of windowMs for everyone, on Redis's
// clock and on Date.now() alike: a test that counts in one must not see it end, or its count starts afresh
// (and its keys expire) mid-test.

/**
 * Waits for the next window of `windowMs` (half a second into it) when less than `marginMs` is left of
 * the current one; returns at once otherwise. `marginMs` is a generous bound on how long the test counts
 * in the window. An hour's end is also a day's and a week's.
 */
export async function clearOfWindowEnd(windowMs: number, marginMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 500));
}
