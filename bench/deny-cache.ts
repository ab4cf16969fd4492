// The deny cache: one identifier sends 100x its limit; how many of its decisions still reach Redis
// with the cache on, and is the number allowed the same as without it?
import { createLimiter, fixedWindow, RedisStore, type Store } from '../src/index.js';
import { BENCH_TIMEOUT_MS } from './contenders.js';
import { count, table } from './format.js';
import type { Section } from './section.js';
import type { BenchServer } from './server.js';

export const DENY_CACHE_LIMIT = 100;
export const DENY_CACHE_REQUESTS = 100 * DENY_CACHE_LIMIT;
// An hour-long window, so that the run never straddles a window boundary (checked below).
const WINDOW_MS = 3_600_000;

export interface DenyCacheRun {
  /** Decisions that reached the store (one Redis round trip each without coalescing). */
  readonly storeDecisions: number;
  /** Script calls the store sent (coalesced batches). */
  readonly scriptCalls: number;
  readonly allowed: number;
}

export interface DenyCacheRecord {
  readonly limit: number;
  readonly requests: number;
  readonly concurrency: number;
  readonly without: DenyCacheRun;
  readonly with: DenyCacheRun;
  /** 1 - store decisions with the cache / without. */
  readonly savedShare: number;
  readonly sameAllowed: boolean;
}

/** A store that counts the decisions it is asked for, then asks the Redis store. */
function counting(inner: RedisStore): Store & { decisions: number } {
  const store = {
    kind: inner.kind,
    decisions: 0,
    decide: (request: Parameters<Store['decide']>[0]) => {
      store.decisions++;
      return inner.decide(request);
    },
    reset: (name: string, identifier: string) => inner.reset(name, identifier),
    keyFor: (name: string, identifier: string) => inner.keyFor(name, identifier),
  };
  return store;
}

async function hammer(bench: BenchServer, denyCache: boolean, concurrency: number): Promise<DenyCacheRun> {
  await bench.flush();
  const redis = new RedisStore({ client: bench.client, prefix: 'deny' });
  const store = counting(redis);
  const limiter = createLimiter({
    store,
    policy: fixedWindow({ limit: DENY_CACHE_LIMIT, windowMs: WINDOW_MS }),
    name: 'hot',
    timeoutMs: BENCH_TIMEOUT_MS,
    denyCache,
  });
  let sent = 0;
  let allowed = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < DENY_CACHE_REQUESTS) {
        sent++;
        if ((await limiter.limit('one-identifier')).allowed) allowed++;
      }
    }),
  );
  return { storeDecisions: store.decisions, scriptCalls: redis.calls, allowed };
}

async function awayFromBoundary(): Promise<void> {
  const left = WINDOW_MS - (Date.now() % WINDOW_MS);
  if (left < 30_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

export async function denyCacheSaving(bench: BenchServer, concurrency: number): Promise<DenyCacheRecord> {
  await awayFromBoundary();
  const without = await hammer(bench, false, concurrency);
  const withCache = await hammer(bench, true, concurrency);
  return {
    limit: DENY_CACHE_LIMIT,
    requests: DENY_CACHE_REQUESTS,
    concurrency,
    without,
    with: withCache,
    savedShare: 1 - withCache.storeDecisions / without.storeDecisions,
    sameAllowed: withCache.allowed === without.allowed,
  };
}

export const denyCacheSection: Section<DenyCacheRecord[]> = {
  name: 'deny-cache',
  async run({ settings, bench, filtered, log }) {
    if (filtered) return [];
    log('Deny cache');
    const rows = [await denyCacheSaving(bench, 1), await denyCacheSaving(bench, settings.concurrency)];
    for (const row of rows) log(`  ${JSON.stringify(row)}`);
    return rows;
  },
  targets(rows) {
    return rows.map((deny) => ({
      target: `Deny cache (${deny.concurrency} in flight): ≥ 95% of Redis calls saved, same allowed count`,
      measured: `${(deny.savedShare * 100).toFixed(2)}% saved; allowed ${deny.with.allowed} with, ${deny.without.allowed} without`,
      met: deny.savedShare >= 0.95 && deny.sameAllowed,
    }));
  },
  render(measured) {
    const first = measured[0];
    if (first === undefined) return [];
    return [
      '## Deny cache',
      '',
      `One identifier sends ${count(first.requests)} requests, 100× its limit (fixedWindow, ${first.limit} per hour), with and without \`denyCache: true\`. ` +
        '"store decisions" are the decisions that reached Redis; "script calls" are the coalesced calls that carried them.',
      '',
      table(
        [
          'in flight',
          'store decisions without',
          'with',
          'saved',
          'script calls without',
          'with',
          'allowed without',
          'with',
        ],
        measured.map((r) => [
          String(r.concurrency),
          count(r.without.storeDecisions),
          count(r.with.storeDecisions),
          `${(r.savedShare * 100).toFixed(2)}%`,
          count(r.without.scriptCalls),
          count(r.with.scriptCalls),
          String(r.without.allowed),
          String(r.with.allowed),
        ]),
      ),
      '',
    ];
  },
};
