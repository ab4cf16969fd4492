// Waiting for a slot: what a `schedule` costs Redis beside a decision, and a fleet of 6 processes calling
// a strict 200-per-second upstream at 175 per second through throttle(), Bottleneck's Redis clustering,
// and a polling loop on limit(): the upstream's busiest second, its 429s, the total time, store calls per job.
import { askSlot, limiterPipeline, type Pipeline } from '../src/core/index.js';
import { createLimiter, gcra, RedisStore } from '../src/index.js';
import { type FleetRun, runFleet } from '../test/helpers/fleet.js';
import type { WorkerConfig } from '../test/helpers/throttle-worker.js';
import type { Section, SectionContext, Target } from './section.js';

const PROCESSES = 6;
const JOBS = 500;
const QUICK_JOBS = 60;
const PER_SECOND = 175;
const UPSTREAM_PER_SECOND = 200;
/** Calls per operation when measuring its Redis-side cost. */
const COST_CALLS = 20_000;

interface Cost {
  readonly operation: string;
  readonly calls: number;
  readonly usecPerCall: number;
}

interface FleetFigures {
  readonly mode: WorkerConfig['mode'];
  readonly jobs: number;
  readonly busiest: number;
  readonly refused: number;
  readonly errors: number;
  readonly totalMs: number;
  readonly idealMs: number;
  readonly storeCallsPerJob: number;
}

export interface ThrottleResult {
  readonly costs: readonly Cost[];
  readonly fleet: readonly FleetFigures[];
}

/** Redis-side µs per call of one operation, one key per call (maxBatch 1), as INFO commandstats counts EVALSHA. */
async function redisCost(
  context: SectionContext,
  operation: 'limit' | 'schedule',
  calls: number,
): Promise<Cost> {
  const { bench } = context;
  const store = new RedisStore({ client: bench.client, maxBatch: 1 });
  const limiter = createLimiter({
    store,
    policy: gcra({ limit: 1000, periodMs: 1000, burst: 1000 }),
    name: `cost-${operation}`,
    timeoutMs: 10_000,
  });
  const pipeline = limiterPipeline(limiter) as Pipeline;
  // Scripts loaded before the count.
  await limiter.peek('warm-up');
  await bench.resetStats();
  const inFlight = 64;
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < calls) {
        const identifier = `user:${next++ % 1000}`;
        if (operation === 'limit') await limiter.limit(identifier);
        else await askSlot(pipeline, identifier, 1, undefined, 60_000);
      }
    }),
  );
  const evalsha = (await bench.commandStats()).get('evalsha');
  return { operation, calls, usecPerCall: evalsha === undefined ? Number.NaN : evalsha.usec / evalsha.calls };
}

function figures(mode: WorkerConfig['mode'], jobs: number, run: FleetRun): FleetFigures {
  return {
    mode,
    jobs,
    busiest: run.busiest,
    refused: run.arrivals.filter((arrival) => arrival.status === 429).length,
    errors: run.reports.reduce((sum, report) => sum + report.errors.length, 0),
    totalMs: run.elapsedMs,
    idealMs: (jobs / PER_SECOND) * 1000,
    storeCallsPerJob: run.storeCalls.length / jobs,
  };
}

export const section: Section<ThrottleResult> = {
  name: 'throttle',
  async run(context) {
    const { log, quick, bench } = context;
    log('Waiting for a slot: Redis-side cost of a schedule, and a fleet against a strict upstream');
    const calls = quick ? 2000 : COST_CALLS;
    const costs = [await redisCost(context, 'limit', calls), await redisCost(context, 'schedule', calls)];
    const jobsEach = quick ? QUICK_JOBS : JOBS;
    const fleet: FleetFigures[] = [];
    for (const mode of ['throttle', 'bottleneck', 'poll'] as const) {
      await bench.flush();
      log(`  ${mode}: ${PROCESSES} processes x ${jobsEach} jobs at ${PER_SECOND}/s`);
      const run = await runFleet({
        mode,
        redisPort: bench.server.port,
        processes: PROCESSES,
        jobsEach,
        perSecond: PER_SECOND,
        upstream: { perSecond: UPSTREAM_PER_SECOND },
        name: `fleet-${mode}`,
      });
      fleet.push(figures(mode, PROCESSES * jobsEach, run));
    }
    return { costs, fleet };
  },
  render(result) {
    const [limit, schedule] = result.costs;
    const lines = [
      '## Waiting for a slot',
      '',
      "`wait()` and `throttle()` take each call's slot with one `schedule` call of the GCRA script (the TAT moves on at once; the reply carries the wait). Redis-side cost per call, from `INFO commandstats` (`usec` of EVALSHA, which includes the commands the script runs), one key per call:",
      '',
      '| operation | calls | script µs per call |',
      '| --- | ---: | ---: |',
      ...result.costs.map((cost) => `| ${cost.operation} | ${cost.calls} | ${cost.usecPerCall.toFixed(2)} |`),
      '',
    ];
    if (limit !== undefined && schedule !== undefined) {
      lines.push(
        `A schedule costs ${(schedule.usecPerCall / limit.usecPerCall).toFixed(2)}× a decision on Redis.`,
        '',
      );
    }
    lines.push(
      `${PROCESSES} processes call a local upstream that allows ${UPSTREAM_PER_SECOND} requests in any second (a sliding log; more are answered 429) and records every arrival, at ${PER_SECOND} per second shared through the same Redis: sluice's \`throttle().fetch\` (gcra, burst 1), Bottleneck 2.19.5's Redis clustering (\`datastore: 'ioredis'\`, \`minTime\` ${(1000 / PER_SECOND).toFixed(2)} ms), and a loop that calls \`limit()\` and sleeps its \`retryAfterMs\`. Store calls are the commands the workers sent (MONITOR; a script's own commands are not counted).`,
      '',
      '| contender | jobs | busiest second | 429s | errors | total | ideal | store calls per job |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...result.fleet.map(
        (run) =>
          `| ${run.mode} | ${run.jobs} | ${run.busiest} | ${run.refused} | ${run.errors} | ${(run.totalMs / 1000).toFixed(2)} s | ${(run.idealMs / 1000).toFixed(2)} s | ${run.storeCallsPerJob.toFixed(3)} |`,
      ),
      '',
    );
    return lines;
  },
  targets(result) {
    const run = result.fleet.find((figure) => figure.mode === 'throttle');
    if (run === undefined) return [];
    const within = run.totalMs <= run.idealMs * 1.1;
    const targets: Target[] = [
      {
        target: `throttle: no second over ${UPSTREAM_PER_SECOND} arrivals, no 429, total within 10% of ${(run.idealMs / 1000).toFixed(1)} s`,
        measured: `${run.busiest} in the busiest second, ${run.refused} 429s, ${(run.totalMs / 1000).toFixed(2)} s`,
        met: run.busiest <= UPSTREAM_PER_SECOND && run.refused === 0 && within,
      },
    ];
    return targets;
  },
};
