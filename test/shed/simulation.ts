// A discrete-event model of a service with K slots and service time S behind a shedder, on a virtual clock.
import { type Admission, createShedder, type ShedderOptions, type Ticket } from '../../src/shed/index.js';

/** The traffic and service of one simulated run. */
export interface Scenario {
  /** Slots of the service, and from `halveAtMs` on, half as many. */
  readonly slots: number;
  readonly serviceMs: number;
  /** Arrivals per second, evenly spaced (open loop: they do not wait for answers). */
  readonly arrivalsPerSecond: number;
  readonly durationMs: number;
  readonly halveAtMs?: number;
  /** The shedder's options; `undefined` runs without one (every request goes to the service's queue). */
  readonly shedder?: ShedderOptions;
  /** Requests of each class, in order: 10% critical, 50% default, 40% sheddable by default. */
  readonly mix?: readonly [string, number][];
  /**
   * How each arrival's class is chosen: `'random'` draws it (bursts of a class happen), `'even'`
   * spreads each class evenly as the real experiment's load generator does.
   * @default 'random'
   */
  readonly classes?: 'random' | 'even';
}

export interface Outcome {
  readonly served: Record<string, number>;
  readonly refused: Record<string, number>;
  readonly latenciesMs: number[];
  /** [timeMs, limit] at each 100 ms. */
  readonly limits: [number, number][];
  readonly maxQueue: number;
  /** Every request: [sent ms, class index, status (200 or 503), latency ms, 1]. */
  readonly answers: [number, number, number, number, 1][];
}

/**
 * What the experiment puts in front of its service (the model, `npm run bench:shed` and the tests): the
 * default classes (critical keeps 20% of the limit, default 10% more) and a short queue, so that a
 * critical request that finds the limit full waits for the next ticket instead of needing a large
 * reserve kept idle (which the limit would grow to fill).
 */
export const EXPERIMENT_SHEDDER = { queue: { max: 10, timeoutMs: 50 } } as const satisfies ShedderOptions;

/** Deterministic pseudo-random numbers in [0, 1) (mulberry32). */
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MIX: readonly [string, number][] = [
  ['critical', 0.1],
  ['default', 0.5],
  ['sheddable', 0.4],
];

interface Job {
  readonly priority: string;
  readonly arrivedMs: number;
  readonly ticket: Ticket | undefined;
  doneMs: number;
}

/** Lets the shedder's answers to waiting requests (promises) arrive before the clock moves on. */
async function answersArrive(): Promise<void> {
  for (let i = 0; i < 3; i += 1) await null;
}

/**
 * Runs one scenario to its end and counts what each class got. Async only so that a shedder with a
 * queue can answer its waiters (microtasks); no timer runs meanwhile, so a wait ends at its deadline
 * on the virtual clock, when the shedder next hands out a ticket.
 */
export async function simulate(scenario: Scenario): Promise<Outcome> {
  let nowMs = 0;
  const shedder =
    scenario.shedder === undefined ? undefined : createShedder({ ...scenario.shedder, now: () => nowMs });
  const random = seeded(7);
  const mix = scenario.mix ?? MIX;
  const served: Record<string, number> = {};
  const refused: Record<string, number> = {};
  for (const [name] of mix) {
    served[name] = 0;
    refused[name] = 0;
  }
  const latenciesMs: number[] = [];
  const answers: Outcome['answers'] = [];
  const indexOf = (name: string) => mix.findIndex(([other]) => other === name);
  const limits: [number, number][] = [];
  const running: Job[] = [];
  const waiting: Job[] = [];
  let waitingHead = 0;
  let maxQueue = 0;
  const gapMs = 1000 / scenario.arrivalsPerSecond;
  let nextArrivalMs = 0;
  let nextLimitMs = 0;
  const slotsAt = (ms: number) =>
    scenario.halveAtMs !== undefined && ms >= scenario.halveAtMs
      ? Math.max(1, scenario.slots / 2)
      : scenario.slots;
  const drawn = (): string => {
    const draw = random();
    let sum = 0;
    for (const [name, share] of mix) {
      sum += share;
      if (draw < sum) return name;
    }
    return (mix[mix.length - 1] as [string, number])[0];
  };
  // Each class earns its share per arrival; the one with the most credit goes (as bench/shed-load.ts).
  const credit = mix.map(() => 0);
  const evenly = (): string => {
    let best = 0;
    for (let index = 0; index < mix.length; index += 1) {
      credit[index] = (credit[index] as number) + (mix[index] as [string, number])[1];
      if ((credit[index] as number) > (credit[best] as number)) best = index;
    }
    credit[best] = (credit[best] as number) - 1;
    return (mix[best] as [string, number])[0];
  };
  const start = (job: Job) => {
    // Service time varies by ±10%, as a real one would.
    job.doneMs = nowMs + scenario.serviceMs * (0.9 + 0.2 * random());
    running.push(job);
  };
  for (;;) {
    let first = -1;
    for (let i = 0; i < running.length; i += 1) {
      if (first === -1 || (running[i] as Job).doneMs < (running[first] as Job).doneMs) first = i;
    }
    const completionMs = first === -1 ? Number.POSITIVE_INFINITY : (running[first] as Job).doneMs;
    const arrivalMs = nextArrivalMs < scenario.durationMs ? nextArrivalMs : Number.POSITIVE_INFINITY;
    if (completionMs === Number.POSITIVE_INFINITY && arrivalMs === Number.POSITIVE_INFINITY) break;
    nowMs = Math.min(completionMs, arrivalMs);
    while (nextLimitMs <= nowMs) {
      limits.push([nextLimitMs, shedder?.limit ?? 0]);
      nextLimitMs += 100;
    }
    if (completionMs <= arrivalMs) {
      const job = running.splice(first, 1)[0] as Job;
      latenciesMs.push(nowMs - job.arrivedMs);
      answers.push([job.arrivedMs, indexOf(job.priority), 200, nowMs - job.arrivedMs, 1]);
      served[job.priority] = (served[job.priority] ?? 0) + 1;
      job.ticket?.release();
    } else {
      nextArrivalMs += gapMs;
      const priority = scenario.classes === 'even' ? evenly() : drawn();
      const arrivedMs = nowMs;
      const admitted = (admission: Admission | undefined): void => {
        if (admission !== undefined && !admission.allowed) {
          refused[priority] = (refused[priority] ?? 0) + 1;
          answers.push([arrivedMs, indexOf(priority), 503, nowMs - arrivedMs, 1]);
          return;
        }
        waiting.push({ priority, arrivedMs, ticket: admission, doneMs: 0 });
      };
      const admission = shedder?.acquire({ priority });
      if (admission instanceof Promise) admission.then(admitted);
      else admitted(admission);
    }
    await answersArrive();
    while (running.length < slotsAt(nowMs) && waitingHead < waiting.length) {
      start(waiting[waitingHead] as Job);
      waitingHead += 1;
    }
    maxQueue = Math.max(maxQueue, waiting.length - waitingHead);
  }
  shedder?.close();
  await answersArrive();
  return { served, refused, latenciesMs, limits, maxQueue, answers };
}

/** The p-th percentile (0–100) of `values`. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}
