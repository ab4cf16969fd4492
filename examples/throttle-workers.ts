// Three worker processes call one rate-limited upstream through sluice/throttle, sharing its pace in Redis.
// `node throttle-workers.js` starts a local upstream that allows 50 requests in any second (more are
// answered 429 with Retry-After), forks the workers, and prints what the upstream saw.
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { createLimiter, gcra, RedisStore } from 'sluice';
import { throttle } from 'sluice/throttle';

const WORKERS = 3;
const CALLS = 20;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A worker: 20 calls to the upstream, paced with every other worker at 40 per second. */
async function worker(url: string): Promise<void> {
  const redis = new Redis(REDIS_URL, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
  });
  await redis.connect();
  const limiter = createLimiter({
    store: new RedisStore({ client: redis }),
    policy: gcra({ limit: 40, periodMs: 1000, burst: 1 }),
    name: 'upstream-example',
    onStoreError: 'fallback',
  });
  const upstream = throttle({ limiter, retries: 3 });
  const statuses = await Promise.all(
    Array.from({ length: CALLS }, async () => {
      const response = await upstream.fetch(url);
      await response.arrayBuffer();
      return response.status;
    }),
  );
  process.send?.(statuses);
  await redis.quit();
}

/** The upstream: 50 requests in any second, a log of arrival times. */
function startUpstream(): Promise<{ url: string; arrivals: number[]; close: () => void }> {
  const arrivals: number[] = [];
  const accepted: number[] = [];
  const server = createServer((request, response) => {
    const now = performance.now();
    arrivals.push(now);
    request.resume();
    if (accepted.filter((at) => at > now - 1000).length >= 50) {
      response.writeHead(429, { 'retry-after': '1' }).end();
      return;
    }
    accepted.push(now);
    response.end('ok');
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({ url: `http://127.0.0.1:${port}/`, arrivals, close: () => server.close() });
    });
  });
}

if (process.argv[2] === 'worker') {
  await worker(process.argv[3] as string);
} else {
  const upstream = await startUpstream();
  const reports = await Promise.all(
    Array.from(
      { length: WORKERS },
      () =>
        new Promise<number[]>((resolve) => {
          const child = fork(process.argv[1] as string, ['worker', upstream.url]);
          child.once('message', (statuses) => resolve(statuses as number[]));
        }),
    ),
  );
  upstream.close();
  const busiest = Math.max(
    ...upstream.arrivals.map((at) => upstream.arrivals.filter((t) => t >= at && t < at + 1000).length),
  );
  console.log(`${WORKERS} workers x ${CALLS} calls, paced together at 40 per second`);
  console.log(`every call answered 200: ${reports.flat().every((status) => status === 200)}`);
  console.log(`busiest second at the upstream: ${busiest} requests (it allows 50)`);
}
