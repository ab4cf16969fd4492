// The shedding experiment: a service of K slots and service time S behind Express and `shed`, loaded from another process.
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { shed } from '../src/http/adapters/express.js';
import { createShedder, type ShedderOptions } from '../src/shed/index.js';
import type { Answer, LoadPlan } from './shed-load.js';

export interface ExperimentPlan {
  readonly slots: number;
  readonly serviceMs: number;
  /** Times the service's capacity (slots / serviceMs) the load arrives at. */
  readonly overload: number;
  readonly durationMs: number;
  /** When the service loses half its slots. */
  readonly halveAtMs: number;
  readonly mix: readonly [string, number][];
}

export interface ExperimentRun {
  readonly name: string;
  readonly answers: readonly Answer[];
  /** [ms from the start, limit, in flight] every 100 ms. */
  readonly timeline: readonly [number, number, number][];
}

/** A resource with `slots` places and a FIFO queue: what a database or a worker pool is to the app. */
class Service {
  #slots: number;
  #busy = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(slots: number) {
    this.#slots = slots;
  }

  set slots(slots: number) {
    this.#slots = slots;
  }

  get queued(): number {
    return this.#waiting.length;
  }

  async serve(serviceMs: number): Promise<void> {
    if (this.#busy >= this.#slots) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#busy += 1;
    await new Promise((resolve) => setTimeout(resolve, serviceMs));
    // The slot passes to the next waiter, unless the slots were cut below those busy: then it goes away,
    // and the waiter stays first in line (taking it out here would lose its request for good).
    const next = this.#busy <= this.#slots ? this.#waiting.shift() : undefined;
    if (next !== undefined) next();
    else this.#busy -= 1;
  }
}

/** Runs one variant: `shedder` undefined serves every request (the reference). */
export async function runExperiment(
  name: string,
  plan: ExperimentPlan,
  shedderOptions: ShedderOptions | undefined,
): Promise<ExperimentRun> {
  const service = new Service(plan.slots);
  const shedder = shedderOptions === undefined ? undefined : createShedder(shedderOptions);
  const app = express();
  if (shedder !== undefined) app.use(shed({ shedder, priority: (req) => req.get('x-priority') }));
  app.get('/work', (_req, res) => {
    service.serve(plan.serviceMs).then(() => res.send('done'));
  });
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const load: LoadPlan = {
    url,
    arrivalsPerSecond: (plan.overload * plan.slots * 1000) / plan.serviceMs,
    durationMs: plan.durationMs,
    mix: plan.mix,
  };
  const timeline: [number, number, number][] = [];
  const start = performance.now();
  const sampler = setInterval(() => {
    const ms = performance.now() - start;
    if (ms >= plan.halveAtMs) service.slots = Math.max(1, Math.floor(plan.slots / 2));
    timeline.push([Math.round(ms), shedder?.limit ?? 0, shedder?.inFlight ?? service.queued]);
  }, 100);
  try {
    const child = fork(new URL('./shed-load.js', import.meta.url), [JSON.stringify(load)], {
      stdio: 'inherit',
    });
    const answers = await new Promise<Answer[]>((resolve, reject) => {
      child.once('message', (message) => resolve(message as Answer[]));
      child.once('exit', (code) =>
        reject(new Error(`the load generator exited with ${code} before answering`)),
      );
    });
    return { name, answers, timeline };
  } finally {
    clearInterval(sampler);
    server.closeAllConnections();
    server.close();
  }
}

/** What one run gives: goodput, p99 of the 200s, each class's served share and refusals, refusals without Retry-After. */
export interface Figures {
  readonly goodputPerSecond: number;
  readonly p99Ms: number;
  readonly p99AfterHalvingMs: number;
  readonly served: Record<string, number>;
  readonly refused: Record<string, number>;
  readonly criticalServed: number;
  readonly refusalsWithoutRetryAfter: number;
  readonly otherFailures: number;
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  values.sort((a, b) => a - b);
  return values[Math.min(values.length - 1, Math.floor((p / 100) * values.length))] as number;
}

export function figures(run: ExperimentRun, plan: ExperimentPlan): Figures {
  const served: Record<string, number> = {};
  const refused: Record<string, number> = {};
  for (const [name] of plan.mix) {
    served[name] = 0;
    refused[name] = 0;
  }
  const latencies: number[] = [];
  const lateLatencies: number[] = [];
  let refusalsWithoutRetryAfter = 0;
  let otherFailures = 0;
  let lastOkMs = 0;
  for (const [sentMs, priority, status, latencyMs, retryAfter] of run.answers) {
    const name = (plan.mix[priority] as [string, number])[0];
    if (status === 200) {
      served[name] = (served[name] ?? 0) + 1;
      latencies.push(latencyMs);
      // After the halving has settled (3 s later), the p99 must be back under its bound.
      if (sentMs >= plan.halveAtMs + Math.min(3000, (plan.durationMs - plan.halveAtMs) / 2))
        lateLatencies.push(latencyMs);
      lastOkMs = Math.max(lastOkMs, sentMs + latencyMs);
    } else if (status === 503) {
      refused[name] = (refused[name] ?? 0) + 1;
      if (retryAfter === 0) refusalsWithoutRetryAfter += 1;
    } else otherFailures += 1;
  }
  const critical = plan.mix[0]?.[0] as string;
  const total = Object.values(served).reduce((sum, count) => sum + count, 0);
  return {
    goodputPerSecond: (total * 1000) / Math.max(plan.durationMs, lastOkMs),
    p99Ms: percentile(latencies, 99),
    p99AfterHalvingMs: percentile(lateLatencies, 99),
    served,
    refused,
    criticalServed: (served[critical] ?? 0) / Math.max(1, (served[critical] ?? 0) + (refused[critical] ?? 0)),
    refusalsWithoutRetryAfter,
    otherFailures,
  };
}
