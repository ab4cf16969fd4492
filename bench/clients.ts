// The client libraries side by side: decisions per second through each (200 in flight, fixed window)
// on the server of SLUICE_TEST_SERVER, and where each spends its time. `node build/bench/clients.js [seconds] [client]`.
import { performance } from 'node:perf_hooks';
import { createLimiter, fixedWindow, RedisStore } from '../src/index.js';
import { CLIENT_KINDS, connect } from '../test/helpers/clients.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { SERVER_FAMILY } from '../test/helpers/server-family.js';

const IN_FLIGHT = 200;
const IDENTIFIERS = 10_000;

interface Row {
  readonly client: string;
  readonly decisions: number;
  readonly perSecond: number;
  /** CPU time of this process (every thread: GLIDE's native core too) per decision, in µs. */
  readonly processCpuUs: number;
  /** Share of the run the event loop was busy (JavaScript: encoding, decoding, sluice). */
  readonly eventLoopBusy: number;
  readonly scriptCalls: number;
}

async function race(
  kind: (typeof CLIENT_KINDS)[number],
  port: number,
  seconds: number,
  maxBatch: number,
): Promise<Row> {
  const connected = await connect(kind, port);
  const store = new RedisStore({ client: connected.client, prefix: `bench-${kind}`, maxBatch });
  const limiter = createLimiter({
    store,
    policy: fixedWindow({ limit: 1_000_000_000, windowMs: 3_600_000 }),
    name: 'clients',
    timeoutMs: 10_000,
  });
  // Warm up: scripts loaded, connections open, code optimised.
  await Promise.all(Array.from({ length: 2000 }, (_, i) => limiter.limit(`warm-${i}`)));
  const callsBefore = store.calls;
  let decisions = 0;
  let running = true;
  const cpuBefore = process.cpuUsage();
  const eluBefore = performance.eventLoopUtilization();
  const startedAt = performance.now();
  const worker = async (offset: number): Promise<void> => {
    for (let i = offset; running; i += IN_FLIGHT) {
      // Built per call, as a request's address is.
      await limiter.limit(`user-${i % IDENTIFIERS}`);
      decisions++;
    }
  };
  const workers = Array.from({ length: IN_FLIGHT }, (_, offset) => worker(offset));
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  running = false;
  await Promise.all(workers);
  const elapsedMs = performance.now() - startedAt;
  const cpu = process.cpuUsage(cpuBefore);
  const elu = performance.eventLoopUtilization(eluBefore);
  await connected.close();
  return {
    client: kind,
    decisions,
    perSecond: Math.round((decisions / elapsedMs) * 1000),
    processCpuUs: Math.round(((cpu.user + cpu.system) / decisions) * 10) / 10,
    eventLoopBusy: Math.round(elu.utilization * 100) / 100,
    scriptCalls: store.calls - callsBefore,
  };
}

async function main(): Promise<void> {
  const seconds = Number(process.argv[2] ?? 5);
  // A third argument runs one client only, e.g. under --cpu-prof.
  const only = process.argv[3];
  const server = await startRedis();
  try {
    const admin = await connect('ioredis', server.port);
    const info = String(await admin.command('INFO', 'server'));
    await admin.close();
    // Valkey also reports the Redis version it is compatible with: its own first.
    const version = /valkey_version:(\S+)/.exec(info)?.[1] ?? /redis_version:(\S+)/.exec(info)?.[1];
    console.log(
      `${SERVER_FAMILY.label} ${version}: ${IN_FLIGHT} in flight, fixed window, ${seconds} s per run`,
    );
    console.log(
      'client        maxBatch  decisions/s  process CPU µs/decision  event loop busy  decisions/call',
    );
    // maxBatch 64 (the default: coalesced) and 1 (one script call per decision: the client's own cost).
    // Twice round, alternating, so a noisy moment does not fall on one client alone.
    for (const maxBatch of [64, 1]) {
      for (let round = 0; round < 2; round++) {
        for (const kind of CLIENT_KINDS.filter((each) => only === undefined || each === only)) {
          const row = await race(kind, server.port, seconds, maxBatch);
          console.log(
            `${row.client.padEnd(13)} ${String(maxBatch).padStart(8)}  ${String(row.perSecond).padStart(11)}  ${String(row.processCpuUs).padStart(23)}  ${String(row.eventLoopBusy).padStart(15)}  ${(row.decisions / row.scriptCalls).toFixed(1).padStart(14)}`,
          );
        }
      }
    }
  } finally {
    await server.stop();
  }
  process.exit(0);
}

await main();
