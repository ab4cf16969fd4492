// Redis-side cost of sluice's decision scripts alone, without a client's load on the machine: the
// batches a busy RedisStore sends (64 keys per EVALSHA over 10,000 identifiers, the server's clock,
// every decision allowed), timed by Redis itself (INFO commandstats `usec` per decision) and by the
// redis-server process's CPU time, in alternating rounds against the scripts of another build.
//
//   node build/bench/redis-script-cost.js [--baseline <file.json>] [--rounds N] [--batches N]
//
// <file.json> maps a script's name (gcra, sliding-log, ...) to its body, as an older build made it
// (`SCRIPTS[name].body` of build/src/stores/redis/scripts.js): each round then times both.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fixedWindow, gcra, type Policy, slidingLog, slidingWindow, tokenBucket } from '../src/index.js';
import { SCRIPTS, type ScriptKey } from '../src/stores/redis/scripts.js';
import { wireOf } from '../src/stores/redis/wire.js';
import { startBenchServer } from './server.js';

const IDENTIFIERS = Number(process.argv[process.argv.indexOf('--identifiers') + 1] ?? 10_000) || 10_000;
const BATCH = 64;

function option(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at === -1 ? undefined : process.argv[at + 1];
}

const rounds = Number(option('--rounds') ?? 5);
const batches = Number(option('--batches') ?? 400);
const baselineFile = option('--baseline');
const baseline: Record<string, string> =
  baselineFile === undefined
    ? {}
    : (JSON.parse(readFileSync(baselineFile, 'utf8')) as Record<string, string>);

const POLICIES: ReadonlyArray<readonly [string, Policy]> = [
  ['fixedWindow', fixedWindow({ limit: 1000, windowMs: 60_000 })],
  ['slidingWindow', slidingWindow({ limit: 1000, windowMs: 60_000 })],
  ['slidingLog', slidingLog({ limit: 1000, windowMs: 60_000 })],
  ['tokenBucket', tokenBucket({ capacity: 1000, refillPerSecond: 20 })],
  ['gcra', gcra({ limit: 1000, periodMs: 60_000 })],
];
const only = option('--only')?.split(',');

const bench = await startBenchServer();
const { admin } = bench;

/** INFO stats' total_net_output_bytes: what the server has written to its clients. */
async function outputBytes(): Promise<number> {
  const match = /total_net_output_bytes:(\d+)/.exec(await admin.info('stats'));
  return Number(match?.[1] ?? 0);
}

async function usecOfScripts(): Promise<number> {
  const stats = await bench.commandStats();
  return (stats.get('evalsha')?.usec ?? 0) + (stats.get('eval')?.usec ?? 0);
}

/** Runs `batches` calls of BATCH keys, identifiers in rotation; µs per decision by commandstats and by CPU. */
async function time(
  body: string,
  policy: Policy,
  sharedCost: boolean,
): Promise<{ script: number; cpu: number; bytes: number }> {
  const sha = createHash('sha1').update(body).digest('hex');
  await admin.call('SCRIPT', 'LOAD', body);
  const wire = wireOf(policy);
  await bench.flush();
  let next = 0;
  const call = async (): Promise<void> => {
    const args: string[] = [sha, String(BATCH)];
    for (let i = 0; i < BATCH; i++) args.push(`bench:${policy.algorithm}:user:${next++ % IDENTIFIERS}`);
    args.push('0', '', ...wire.args);
    // The batch's one cost, as sluice sends equal costs (lua/single.lua); the baseline, a script
    // from before that form, one cost per key.
    if (sharedCost) args.push('*1');
    else for (let i = 0; i < BATCH; i++) args.push('1');
    args.push('0');
    if (wire.named !== undefined) args.push(wire.named);
    await admin.call('EVALSHA', ...args);
  };
  // Every identifier gets state first: the timed decisions read and write existing keys.
  for (let i = 0; i < IDENTIFIERS / BATCH + 1; i++) await call();
  await bench.resetStats();
  const cpuBefore = await bench.cpuUsec();
  const bytesBefore = await outputBytes();
  for (let i = 0; i < batches; i++) await call();
  const bytes = (await outputBytes()) - bytesBefore;
  const cpu = (await bench.cpuUsec()) - cpuBefore;
  const decisions = batches * BATCH;
  const stats = await bench.commandStats();
  const gets = (stats.get('get')?.calls ?? 0) / decisions;
  if (process.argv.includes('--gets')) console.log(`  GET per decision ${gets.toFixed(2)}`);
  return { script: (await usecOfScripts()) / decisions, cpu: cpu / decisions, bytes: bytes / decisions };
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

for (const [label, policy] of POLICIES) {
  if (only !== undefined && !only.includes(label)) continue;
  const name = wireOf(policy).script.name as ScriptKey;
  const bodies: Array<[string, string]> = [['this build', SCRIPTS[name].body]];
  const old = baseline[name];
  if (old !== undefined) bodies.unshift(['baseline', old]);
  const results = new Map<string, { script: number[]; cpu: number[]; bytes: number[] }>();
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? bodies : [...bodies].reverse();
    for (const [which, body] of order) {
      const r = await time(body, policy, which === 'this build');
      const entry = results.get(which) ?? { script: [], cpu: [], bytes: [] };
      entry.script.push(r.script);
      entry.cpu.push(r.cpu);
      entry.bytes.push(r.bytes);
      results.set(which, entry);
    }
  }
  for (const [which, { script, cpu, bytes }] of results) {
    const lo = Math.min(...script).toFixed(2);
    const hi = Math.max(...script).toFixed(2);
    console.log(
      `${label.padEnd(14)} ${which.padEnd(10)} script ${median(script).toFixed(2)} µs/decision (rounds ${lo}–${hi})  cpu ${median(cpu).toFixed(2)} µs  reply ${median(bytes).toFixed(1)} bytes/decision`,
    );
  }
}
await bench.close();
