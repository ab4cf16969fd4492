// The regions rig: a redis-server per region with its own load processes, and one global redis-server
// that each region reaches through a delay proxy of its own (so one region's link can be cut alone).
import { type ChildProcess, fork } from 'node:child_process';
import { getPriority, setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Connected, connect } from './clients.js';
import { type DelayProxy, startDelayProxy } from './delay-proxy.js';
import { type RedisServer, startRedis } from './redis-server.js';
import type { LoadPlan, LoadReport } from './region-load.js';

const LOAD = join(dirname(fileURLToPath(import.meta.url)), 'region-load.js');

/**
 * The rig's scheduling priority (nice value): its servers, its load processes (each region's app,
 * with its budget worker) and this process (the delay proxies, the regions' links to the global
 * store). Regions run on hosts of their own, which the suites and processes beside the rig on a
 * loaded CI machine do not starve; at the default priority, at a load average of 16 on 2 cores, a
 * ledger round trip of 40 ms took 330-390 ms and the load processes stalled for up to 450 ms, then
 * asked in a burst: a 1 s window's reserve was granted after the window (260 of 300 admitted).
 * Ignored where the process may not raise it (not root, no CAP_SYS_NICE).
 */
const RIG_PRIORITY = -10;

/** Sets a process's nice value where permitted; the value it had, or undefined when not changed. */
function raise(pid: number): number | undefined {
  try {
    const before = getPriority(pid);
    setPriority(pid, RIG_PRIORITY);
    return before;
  } catch {
    return undefined;
  }
}

/** A load process: what it reported so far, and when it is done. */
export interface Load {
  readonly region: string;
  readonly child: ChildProcess;
  readonly reports: LoadReport[];
  /** Resolves once the process has connected to its stores. */
  readonly ready: Promise<void>;
  /** Resolves when the process exits (a SIGKILL included). */
  readonly exited: Promise<void>;
}

export interface Rig {
  readonly regions: readonly string[];
  readonly regionServers: readonly RedisServer[];
  readonly global: RedisServer;
  /** Each region's way to the global store, in the order of `regions`. */
  readonly proxies: readonly DelayProxy[];
  /** A connection to the global store without delay, for looking at the ledger. */
  readonly admin: Connected;
  /** Starts a load process for a region; the plan's ports are filled in. */
  load(plan: Omit<LoadPlan, 'regionPort' | 'globalPort' | 'regions'>): Load;
  /**
   * Once every load is ready, starts them all at the first boundary of `alignMs` at least `leadMs`
   * away (a window, so that counts per window start with a whole one); resolves to that time.
   */
  start(loads: readonly Load[], alignMs: number, leadMs?: number): Promise<number>;
  /** Script calls the global store has run (INFO commandstats: EVALSHA, EVAL, FCALL). */
  globalScriptCalls(): Promise<number>;
  /** The ledger's fields for one identifier of the limiter the loads make (`rig`), as numbers. */
  ledger(identifier: string): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

export async function startRig(regions: readonly string[], delayMs: number): Promise<Rig> {
  const global = await startRedis({ priority: RIG_PRIORITY });
  const regionServers = await Promise.all(regions.map(() => startRedis({ priority: RIG_PRIORITY })));
  // This process carries the links (the proxies): raised while the rig runs, restored by stop().
  const ownPriority = raise(process.pid);
  const proxies = await Promise.all(regions.map(() => startDelayProxy(global.port, delayMs)));
  const admin = await connect('ioredis', global.port);
  const loads: Load[] = [];
  return {
    regions,
    regionServers,
    global,
    proxies,
    admin,
    load(plan) {
      const at = regions.indexOf(plan.region);
      const full: LoadPlan = {
        ...plan,
        regions,
        regionPort: (regionServers[at] as RedisServer).port,
        globalPort: (proxies[at] as DelayProxy).port,
      };
      const child = fork(LOAD, [JSON.stringify(full)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      if (child.pid !== undefined) raise(child.pid);
      const reports: LoadReport[] = [];
      let markReady: () => void = () => {};
      const ready = new Promise<void>((resolve) => {
        markReady = resolve;
      });
      child.on('message', (message) => {
        const report = message as LoadReport;
        if (report.ready === true) markReady();
        else reports.push(report);
      });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const load = { region: plan.region, child, reports, ready, exited };
      loads.push(load);
      return load;
    },
    async start(started, alignMs, leadMs = 300) {
      await Promise.all(started.map((load) => load.ready));
      const startAt = (Math.floor((Date.now() + leadMs) / alignMs) + 1) * alignMs;
      for (const load of started) load.child.send({ startAt });
      return startAt;
    },
    async globalScriptCalls() {
      const info = String(await admin.command('INFO', 'commandstats'));
      let calls = 0;
      for (const match of info.matchAll(/^cmdstat_(evalsha|eval|fcall):calls=(\d+)/gm))
        calls += Number(match[2]);
      return calls;
    },
    async ledger(identifier) {
      const flat = (await admin.command('HGETALL', `rl:budget:rig:{${identifier}}`)) as string[];
      const fields: Record<string, number> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i] as string] = Number(flat[i + 1]);
      return fields;
    },
    async stop() {
      for (const load of loads) if (load.child.exitCode === null) load.child.kill('SIGKILL');
      await Promise.all(loads.map((load) => load.exited));
      await admin.close();
      await Promise.all(proxies.map((proxy) => proxy.close()));
      await Promise.all([global, ...regionServers].map((server) => server.stop()));
      if (ownPriority !== undefined) setPriority(process.pid, ownPriority);
    },
  };
}

/** Admitted and denied units per bin and region, summed over every report of every load. */
export interface Tally {
  /** bin -> region -> counts */
  readonly bins: ReadonlyMap<number, ReadonlyMap<string, { admitted: number; denied: number }>>;
  admitted(bin: number, region?: string): number;
  asked(bin: number, region?: string): number;
}

export function tally(loads: readonly Load[]): Tally {
  const bins = new Map<number, Map<string, { admitted: number; denied: number }>>();
  for (const load of loads) {
    for (const report of load.reports) {
      for (const [bin, counts] of Object.entries(report.bins)) {
        const byRegion = bins.get(Number(bin)) ?? new Map<string, { admitted: number; denied: number }>();
        const sum = byRegion.get(report.region) ?? { admitted: 0, denied: 0 };
        sum.admitted += counts.admitted;
        sum.denied += counts.denied;
        byRegion.set(report.region, sum);
        bins.set(Number(bin), byRegion);
      }
    }
  }
  const sum = (
    bin: number,
    region: string | undefined,
    pick: (c: { admitted: number; denied: number }) => number,
  ) => {
    let total = 0;
    for (const [name, counts] of bins.get(bin) ?? [])
      if (region === undefined || name === region) total += pick(counts);
    return total;
  };
  return {
    bins,
    admitted: (bin, region) => sum(bin, region, (c) => c.admitted),
    asked: (bin, region) => sum(bin, region, (c) => c.admitted + c.denied),
  };
}

/** Every duration in µs the timed loads reported, budgeted and plain. */
export function latencies(loads: readonly Load[]): { budget: number[]; plain: number[] } {
  const budget: number[] = [];
  const plain: number[] = [];
  for (const load of loads) {
    for (const report of load.reports) {
      if (report.latencies === undefined) continue;
      budget.push(...report.latencies.budget);
      plain.push(...report.latencies.plain);
    }
  }
  return { budget, plain };
}

/** The p-th percentile (0-100) of some numbers. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}
