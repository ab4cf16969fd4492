// A fleet of worker processes calling one local upstream at a shared pace (test/helpers/throttle-worker.ts),
// watched by MONITOR: what the throttle suites assert and the benchmark reports.
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { nextMessage } from './child.js';
import { clientCommands, type Monitored, startMonitor } from './monitor.js';
import type { WorkerConfig, WorkerReport } from './throttle-worker.js';
import { type Arrival, busiestSpan, type UpstreamOptions } from './upstream.js';

const WORKER = fileURLToPath(new URL('./throttle-worker.js', import.meta.url));
const UPSTREAM = fileURLToPath(new URL('./upstream-process.js', import.meta.url));

export interface FleetOptions {
  readonly mode: WorkerConfig['mode'];
  readonly redisPort: number;
  readonly processes: number;
  readonly jobsEach: number;
  /** The pace the workers share. */
  readonly perSecond: number;
  readonly upstream: UpstreamOptions;
  readonly name: string;
  readonly retries?: number;
}

export interface FleetRun {
  readonly arrivals: readonly Arrival[];
  readonly reports: readonly WorkerReport[];
  /** Commands the workers sent to Redis during the run (round trips; a script's own commands are not counted). */
  readonly storeCalls: readonly Monitored[];
  /** The most arrivals in any 1-second span of the upstream's log. */
  readonly busiest: number;
  /** From "go" to the last worker's report, in ms. */
  readonly elapsedMs: number;
}

/** Starts the workers, lets them go together, and gathers what the upstream and Redis saw. */
export async function runFleet(options: FleetOptions): Promise<FleetRun> {
  const upstream = fork(UPSTREAM, [], { stdio: 'inherit' });
  const url = nextMessage(upstream, 'url');
  upstream.send({ type: 'start', options: options.upstream });
  const upstreamUrl = (await url) as string;
  const children: ChildProcess[] = [];
  let arrivals: Arrival[] = [];
  try {
    for (let i = 0; i < options.processes; i++) {
      const child = fork(WORKER, [], { stdio: 'inherit' });
      children.push(child);
      await nextMessage(child, 'started');
    }
    const ready = children.map((child) => nextMessage(child, 'ready'));
    children.forEach((child, i) => {
      const config: WorkerConfig = {
        mode: options.mode,
        redisPort: options.redisPort,
        url: upstreamUrl,
        worker: String(i),
        jobs: options.jobsEach,
        name: options.name,
        perSecond: options.perSecond,
        ...(options.retries === undefined ? {} : { retries: options.retries }),
      };
      child.send({ type: 'prepare', config });
    });
    await Promise.all(ready);
    const monitor = await startMonitor(options.redisPort);
    const reported = children.map((child) => nextMessage(child, 'report'));
    const started = performance.now();
    for (const child of children) child.send({ type: 'go' });
    const reports = (await Promise.all(reported)) as WorkerReport[];
    const elapsedMs = performance.now() - started;
    await monitor.stop();
    const logged = nextMessage(upstream, 'arrivals');
    upstream.send({ type: 'stop' });
    arrivals = (await logged) as Arrival[];
    return {
      arrivals,
      reports,
      // A process's load of the scripts when it connects (SCRIPT EXISTS, SCRIPT LOAD) is no call's.
      storeCalls: clientCommands(monitor).filter(
        (command) => !/^(SCRIPT|FUNCTION)$/i.test(command.args[0] ?? ''),
      ),
      busiest: busiestSpan(arrivals),
      elapsedMs,
    };
  } finally {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.send({ type: 'exit' });
          }),
      ),
    );
    if (upstream.exitCode === null) upstream.kill();
  }
}
