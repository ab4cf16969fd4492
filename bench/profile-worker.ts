// Runs one hot path in a process of its own for bench/profile.ts: under `node --cpu-prof` (the
// parent's flag) a measured run whose window on the profile's clock it prints; or an anatomy of a
// decision: the async resources (promises, timers) and bytes it allocates, and where.
//   node --expose-gc [--cpu-prof ...] build/bench/profile-worker.js '<job as JSON>'
import { createHook } from 'node:async_hooks';
import { Session } from 'node:inspector/promises';
import { Redis } from 'ioredis';
import { type Contender, sluiceRedis } from './contenders.js';
import { collectGarbage, runLoad } from './load.js';
import { memoryContenders } from './memory-contenders.js';
import { policy } from './redis.js';
import { redisFloor } from './redis-floor.js';

export interface ProfileJob {
  readonly kind: 'profile' | 'anatomy';
  readonly id: string;
  /** The bench's redis-server, for the contenders on Redis. */
  readonly redisPort?: number;
  readonly concurrency: number;
  readonly identifiers: number;
  /** profile: the measured run's length. */
  readonly durationMs: number;
  /** anatomy: decisions counted. */
  readonly decisions: number;
}

export interface ProfileRun {
  readonly perSecond: number;
  /** The measured run on the CPU profile's clock (µs). */
  readonly fromUs: number;
  readonly toUs: number;
}

export interface Anatomy {
  /** Async resources created per decision, by type (PROMISE, Timeout, TickObject...). */
  readonly resources: Record<string, number>;
  /** Bytes allocated per decision (sampled), and by the functions that allocated the most. */
  readonly bytes: number;
  readonly sites: ReadonlyArray<{ readonly site: string; readonly bytes: number }>;
}

interface SampledNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly SampledNode[];
}

function microseconds(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

function contenderFor(job: ProfileJob, client: Redis | undefined): Contender {
  const found =
    client === undefined
      ? memoryContenders().find((c) => c.id === job.id)
      : job.id.startsWith('sluice.')
        ? sluiceRedis(client, policy(job.id.slice('sluice.'.length)))
        : [redisFloor(client)].find((c) => c.id === job.id);
  if (found === undefined) throw new Error(`No contender ${job.id} to profile`);
  return found;
}

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2] ?? '{}') as ProfileJob;
  const client =
    job.redisPort === undefined
      ? undefined
      : new Redis({
          port: job.redisPort,
          host: '127.0.0.1',
          lazyConnect: true,
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
        });
  try {
    await client?.connect();
    const contender = contenderFor(job, client);
    await contender.prepare?.();
    const decider = contender.setup();
    const load = { concurrency: job.concurrency, identifiers: job.identifiers, latency: false };
    await runLoad(decider, { ...load, durationMs: 500, minDecisions: 2 * job.identifiers });
    collectGarbage();
    if (job.kind === 'profile') {
      const fromUs = microseconds();
      const result = await runLoad(decider, { ...load, durationMs: job.durationMs });
      const run: ProfileRun = { perSecond: result.perSecond, fromUs, toUs: microseconds() };
      process.stdout.write(JSON.stringify(run));
      return;
    }
    const resources: Record<string, number> = {};
    const hook = createHook({
      init(_id, type) {
        resources[type] = (resources[type] ?? 0) + 1;
      },
    });
    hook.enable();
    const counted = await runLoad(decider, { ...load, durationMs: 0, minDecisions: job.decisions });
    hook.disable();
    const session = new Session();
    session.connect();
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 128,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    const sampled = await runLoad(decider, { ...load, durationMs: 0, minDecisions: job.decisions });
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as {
      profile: { head: SampledNode };
    };
    session.disconnect();
    const sites = new Map<string, number>();
    let total = 0;
    const walk = (node: SampledNode): void => {
      const frame = node.callFrame;
      const file = frame.url.replace(/^.*\/(build|node_modules)\//, '');
      const site = `${frame.functionName || '(anonymous)'}${file === '' ? '' : ` (${file}:${frame.lineNumber + 1})`}`;
      total += node.selfSize;
      if (node.selfSize > 0) sites.set(site, (sites.get(site) ?? 0) + node.selfSize);
      for (const child of node.children) walk(child);
    };
    walk(profile.head);
    const anatomy: Anatomy = {
      resources: Object.fromEntries(
        Object.entries(resources).map(([type, n]) => [type, n / counted.decisions]),
      ),
      bytes: total / sampled.decisions,
      sites: [...sites]
        .map(([site, bytes]) => ({ site, bytes: bytes / sampled.decisions }))
        .sort((a, b) => b.bytes - a.bytes)
        .slice(0, 12),
    };
    process.stdout.write(JSON.stringify(anatomy));
  } finally {
    client?.disconnect();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
