// A process calling wait() on one identifier many times at once, for the fleet order suite: it reports
// the wait the store gave each call (in the order its connection sent them) and when each resolved.
import { Redis } from 'ioredis';
import { createLimiter, gcra, RedisStore, tokenBucket } from '../../src/index.js';
import { epochNow } from './upstream.js';

export interface WaitWorkerConfig {
  readonly port: number;
  readonly name: string;
  readonly algorithm: 'gcra' | 'tokenBucket';
  readonly calls: number;
}

export interface WaitWorkerReport {
  /** The client's address as MONITOR shows it. */
  readonly address: string;
  /** The store's wait for each schedule, in the order the store answered (the order sent: one connection, one call per script). */
  readonly waits: readonly number[];
  /** When each wait() resolved (ms since the epoch), and whether it was allowed, in the order called. */
  readonly resolved: ReadonlyArray<{ readonly atMs: number; readonly allowed: boolean }>;
  /** Script calls the store sent. */
  readonly storeCalls: number;
  /**
   * The longest the event loop went without running a 5 ms timer during the run (ms): past 100 ms
   * a slot can come late, and wait() then lets it go and takes a new one (a second store call).
   */
  readonly stalledMs: number;
}

async function run(config: WaitWorkerConfig): Promise<WaitWorkerReport> {
  const client = new Redis({ port: config.port, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  await new Promise((resolve) => client.once('ready', resolve));
  // One call per script: MONITOR then shows each call, in the order this connection sent it.
  const store = new RedisStore({ client, maxBatch: 1 });
  const policy =
    config.algorithm === 'gcra'
      ? gcra({ limit: 50, periodMs: 1000, burst: 1 })
      : tokenBucket({ capacity: 1, refillPerSecond: 50 });
  const waits: number[] = [];
  const limiter = createLimiter({
    store,
    policy,
    name: config.name,
    timeoutMs: 30_000,
    onDecision: (decision, context) => {
      if (context.operation === 'schedule') waits.push((decision as { waitMs?: number }).waitMs ?? -1);
    },
  });
  // The scripts loaded before the run (a first EVALSHA answered NOSCRIPT is sent again).
  await limiter.peek('warm-up');
  const go = new Promise<void>((resolve) => process.once('message', () => resolve()));
  process.send?.({ ready: true });
  await go;
  let stalledMs = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    stalledMs = Math.max(stalledMs, now - last);
    last = now;
  }, 5);
  const resolved = await Promise.all(
    Array.from({ length: config.calls }, async () => {
      const decision = await limiter.wait('shared');
      return { atMs: epochNow(), allowed: decision.allowed };
    }),
  );
  clearInterval(ticker);
  stalledMs = Math.max(stalledMs, performance.now() - last);
  const address = `${client.stream.localAddress}:${client.stream.localPort}`;
  await client.quit();
  return { address, waits, resolved, storeCalls: store.calls, stalledMs };
}

process.once('message', async (config: WaitWorkerConfig) => {
  const report = await run(config);
  process.send?.({ report }, () => process.exit(0));
});
