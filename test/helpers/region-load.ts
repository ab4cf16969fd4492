// One load process of a region in the regions rig: a budgeted limiter on the region's redis-server (and a
// plain one beside it, for latency), asked at the rate its plan says, reporting counts to its parent.
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import {
  type BudgetLimiter,
  createLimiter,
  type Decision,
  fixedWindow,
  type Limiter,
  type Policy,
  RedisStore,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';

/** What a load process is to do; sent as JSON in its first argument. */
export interface LoadPlan {
  readonly region: string;
  readonly regions: readonly string[];
  readonly regionPort: number;
  /** The global store's port as this region reaches it (a delay proxy of its own). */
  readonly globalPort: number;
  readonly policy:
    | { readonly kind: 'fixed' | 'sliding'; readonly limit: number; readonly windowMs: number }
    | { readonly kind: 'bucket'; readonly capacity: number; readonly refillPerSecond: number };
  readonly budget: { readonly leaseMs?: number; readonly floor?: number; readonly reserve?: number };
  /** Identifiers the demand is spread over, round robin. */
  readonly identifiers: readonly string[];
  /** How long to ask, from the start its parent gives once every load is ready. */
  readonly durationMs: number;
  /** Units per second this process asks, from each `afterMs` (after the start) on. */
  readonly phases: ReadonlyArray<{ readonly afterMs: number; readonly unitsPerSecond: number }>;
  /** Time every call of the budgeted limiter and of a plain one beside it (one call each per unit). */
  readonly timed: boolean;
  /** The counts are kept per this many ms (a window; 10 ms for a bucket). */
  readonly binMs: number;
}

/** What a load process sends its parent: `{ ready: true }` once connected, then counts since its last message, by bin (epoch ms / binMs). */
export interface LoadReport {
  readonly ready?: boolean;
  readonly region: string;
  readonly bins: Record<string, { admitted: number; denied: number }>;
  readonly errors: number;
  /** With `timed`, at the end: every call's duration in µs, budgeted and plain. */
  readonly latencies?: { readonly budget: number[]; readonly plain: number[] };
  readonly done?: boolean;
}

function policyOf(plan: LoadPlan): Policy {
  const p = plan.policy;
  if (p.kind === 'bucket') return tokenBucket({ capacity: p.capacity, refillPerSecond: p.refillPerSecond });
  const make = p.kind === 'fixed' ? fixedWindow : slidingWindow;
  return make({ limit: p.limit, windowMs: p.windowMs });
}

function client(port: number): Redis {
  // Connect again soon after a cut link heals (the rig cuts and heals links on purpose).
  const redis = new Redis({
    port,
    host: '127.0.0.1',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 100,
  });
  redis.on('error', () => {});
  return redis;
}

/** Units due `elapsed` ms after the start: the integral of the plan's rates. */
function dueBy(plan: LoadPlan, elapsed: number): number {
  let units = 0;
  plan.phases.forEach((phase, i) => {
    const end = Math.min(elapsed, plan.phases[i + 1]?.afterMs ?? plan.durationMs, plan.durationMs);
    if (end > phase.afterMs) units += ((end - phase.afterMs) * phase.unitsPerSecond) / 1000;
  });
  return Math.floor(units);
}

/**
 * The bin of a decision: a window's is the window the region's store counted it in (the window ends
 * `resetMs` after the reply, on the store's clock; rounding absorbs the reply's way back), not the
 * one the call was sent in, which a call sent at a window's last moment may miss. A bucket's is
 * when it was sent.
 */
function binOf(plan: LoadPlan, at: number, decision: Decision): number {
  if (plan.policy.kind === 'bucket' || decision.resetMs <= 0) return Math.floor(at / plan.binMs);
  return Math.round((Date.now() + decision.resetMs) / plan.binMs) - 1;
}

/** Waits for the parent's start time (epoch ms), sent once every load is ready. */
function startTime(): Promise<number> {
  return new Promise((resolve) => {
    process.once('message', (message) => resolve((message as { startAt: number }).startAt));
  });
}

async function main(): Promise<void> {
  const plan = JSON.parse(process.argv[2] as string) as LoadPlan;
  const regionClient = client(plan.regionPort);
  const globalClient = client(plan.globalPort);
  const store = new RedisStore({ client: regionClient });
  const global = new RedisStore({ client: globalClient });
  await Promise.all([store.ready(), global.ready()]);
  let errors = 0;
  const limiter: BudgetLimiter = createLimiter({
    store,
    policy: policyOf(plan),
    name: 'rig',
    timeoutMs: 1000,
    onStoreError: 'deny',
    budget: { global, region: plan.region, regions: plan.regions, ...plan.budget },
    onError: (error) => {
      errors++;
      if (process.env.SLUICE_RIG_DEBUG) console.error(plan.region, error.message);
    },
  });
  const plain: Limiter = createLimiter({
    store,
    policy: fixedWindow({ limit: 1e9, windowMs: 1000 }),
    name: 'plain',
  });
  let bins: Record<string, { admitted: number; denied: number }> = {};
  const latencies = { budget: [] as number[], plain: [] as number[] };
  const flush = (done: boolean, sent?: () => void): void => {
    const report: LoadReport = {
      region: plan.region,
      bins,
      errors,
      ...(done && plan.timed ? { latencies } : {}),
      ...(done ? { done } : {}),
    };
    // The last report can be large (every latency): the channel closes only once it is sent.
    process.send?.(report, undefined, {}, () => sent?.());
    bins = {};
  };
  const reporter = setInterval(() => flush(false), 100);
  let issued = 0;
  const pending = new Set<Promise<void>>();
  const ask = (identifier: string): void => {
    const at = Date.now();
    const started = performance.now();
    // Timed, a plain call starts beside the budgeted one: both wait in the same queues.
    const plainCall = plan.timed
      ? plain.limit(identifier).then(() => {
          latencies.plain.push(Math.round((performance.now() - started) * 1000));
        })
      : undefined;
    const call = limiter.limit(identifier).then(async (decision) => {
      if (plan.timed) latencies.budget.push(Math.round((performance.now() - started) * 1000));
      await plainCall;
      const bin = String(binOf(plan, at, decision));
      const counts = bins[bin] ?? { admitted: 0, denied: 0 };
      bins[bin] = counts;
      if (decision.allowed) counts.admitted++;
      else counts.denied++;
    });
    pending.add(call);
    call.finally(() => pending.delete(call));
  };
  const starting = startTime();
  process.send?.({ region: plan.region, bins: {}, errors: 0, ready: true } satisfies LoadReport);
  const startAt = await starting;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
  while (Date.now() < startAt + plan.durationMs) {
    const due = dueBy(plan, Date.now() - startAt);
    while (issued < due) ask(plan.identifiers[issued++ % plan.identifiers.length] as string);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  await Promise.all(pending);
  clearInterval(reporter);
  limiter.close();
  regionClient.disconnect();
  globalClient.disconnect();
  flush(true, () => process.disconnect?.());
}

void main();
