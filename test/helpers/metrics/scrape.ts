// Reads a Prometheus text exposition back into numbers by series, as a scraper would.
import assert from 'node:assert/strict';

export interface Scraped {
  readonly text: string;
  /** The value of one series, written as it appears: `sluice_units_total{limiter="api"}`. */
  value(series: string): number;
  /** Every series whose line starts with `prefix`. */
  series(prefix: string): Map<string, number>;
}

export async function scrape(registry: { metrics(): Promise<string> }): Promise<Scraped> {
  const text = await registry.metrics();
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    values.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return {
    text,
    value(series) {
      const value = values.get(series);
      assert.notEqual(value, undefined, `no series ${series} in:\n${text}`);
      return value as number;
    },
    series: (prefix) => new Map([...values].filter(([key]) => key.startsWith(prefix))),
  };
}

/** The three outcomes of a limiter, in order allowed, denied, shadow_denied. */
export function outcomes(scraped: Scraped, limiter: string): number[] {
  return ['allowed', 'denied', 'shadow_denied'].map((outcome) =>
    scraped.value(`sluice_decisions_total{limiter="${limiter}",outcome="${outcome}"}`),
  );
}

/** The four reasons the store did not decide, in order timeout, store_error, skipped, fallback. */
export function skipped(scraped: Scraped, limiter: string): number[] {
  return ['timeout', 'store_error', 'skipped', 'fallback'].map((reason) =>
    scraped.value(`sluice_store_skipped_total{limiter="${limiter}",reason="${reason}"}`),
  );
}

/** The store decision time histogram's cumulative buckets, checked to be cumulative, and its count. */
export function histogram(
  scraped: Scraped,
  limiter: string,
): { count: number; sum: number; buckets: number[] } {
  const buckets = [...scraped.series(`sluice_store_decision_seconds_bucket{limiter="${limiter}"`).values()];
  assert.equal(buckets.length, 14, 'thirteen bounds from 0.1 ms to 1 s, and +Inf');
  for (let i = 1; i < buckets.length; i++) assert.ok((buckets[i] as number) >= (buckets[i - 1] as number));
  const count = scraped.value(`sluice_store_decision_seconds_count{limiter="${limiter}"}`);
  assert.equal(buckets[buckets.length - 1], count, '+Inf holds every observation');
  return { count, sum: scraped.value(`sluice_store_decision_seconds_sum{limiter="${limiter}"}`), buckets };
}
