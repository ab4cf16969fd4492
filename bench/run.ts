// `npm run bench`: races sluice against its peers on a redis-server of its own, writes
// bench/results/<date>.json and regenerates BENCHMARKS.md. Not a test: it never runs in CI.
//
//   npm run bench                      the full run (a few minutes), writes the results and BENCHMARKS.md
//   npm run bench -- --quick           one short round of everything, printed only
//   npm run bench -- --only redis,memory   some sections: redis, batch, memory, memory-store, deny-cache, fairness
//   npm run bench -- --filter gcra,=rlf.RateLimiterRedis   only these contenders (substring, or =exact id)
//   npm run bench -- --report <file>   regenerates BENCHMARKS.md from a results file, without a run
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gcra } from '../src/index.js';
import {
  type Contender,
  LIMIT,
  memoryContenders,
  peersOnRedis,
  SLUICE_POLICIES,
  type SluicePolicy,
  seedReference,
  sluiceRedis,
  WINDOW_MS,
} from './contenders.js';
import { denyCacheSaving } from './deny-cache.js';
import { fairness } from './fairness.js';
import { machine, versions } from './machine.js';
import { memoryPerIdentifier, slidingLogPerEntry } from './memory.js';
import { measureInChild, race } from './race.js';
import { computeTargets, type Results, renderMarkdown, type Settings } from './report.js';
import { startBenchServer } from './server.js';

const SECTIONS = ['redis', 'batch', 'memory', 'memory-store', 'deny-cache', 'fairness'] as const;
type Section = (typeof SECTIONS)[number];

const ROOT = process.cwd();
/** maxBatch values swept for GCRA (1 is one call per decision; 64 the default). */
const MAX_BATCH_SIZES = [1, 8, 32, 64, 128, 256] as const;
const MEMORY_STORE_ROUNDS = 7;
const NOTES = join('bench', 'notes.md');

interface Args {
  readonly quick: boolean;
  readonly only: Set<Section>;
  readonly filter: readonly string[] | undefined;
  readonly report?: string;
}

function parseArgs(argv: readonly string[]): Args {
  const quick = argv.includes('--quick');
  const filterAt = argv.indexOf('--filter');
  const filter = filterAt === -1 ? undefined : (argv[filterAt + 1] ?? '').split(',');
  const onlyAt = argv.indexOf('--only');
  const reportAt = argv.indexOf('--report');
  let only = new Set<Section>(SECTIONS);
  if (onlyAt !== -1) {
    const names = (argv[onlyAt + 1] ?? '').split(',');
    for (const name of names) {
      if (!(SECTIONS as readonly string[]).includes(name)) {
        throw new Error(`Expected --only to list sections among ${SECTIONS.join(', ')}, got "${name}".`);
      }
    }
    only = new Set(names as Section[]);
  }
  const report = reportAt === -1 ? undefined : argv[reportAt + 1];
  return report === undefined ? { quick, only, filter } : { quick, only, filter, report };
}

function writeReport(results: Results, resultsPath: string): void {
  writeFileSync(join(ROOT, 'BENCHMARKS.md'), renderMarkdown(results, resultsPath, join(ROOT, NOTES)));
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.report !== undefined) {
    const results = JSON.parse(readFileSync(join(ROOT, args.report), 'utf8')) as Results;
    writeReport(results, args.report);
    console.log(`BENCHMARKS.md regenerated from ${args.report}`);
    return;
  }
  const settings: Settings = args.quick
    ? {
        rounds: 1,
        warmupMs: 300,
        durationMs: 1000,
        concurrency: 200,
        identifiers: 10_000,
        limit: LIMIT,
        windowMs: WINDOW_MS,
      }
    : {
        rounds: 4,
        warmupMs: 500,
        durationMs: 2000,
        concurrency: 200,
        identifiers: 10_000,
        limit: LIMIT,
        windowMs: WINDOW_MS,
      };
  const identifiers = Array.from({ length: settings.identifiers }, (_, i) => `user:${i}`);
  const log = (line: string) => console.log(line);
  const chosen = (contenders: Contender[]): Contender[] =>
    args.filter === undefined
      ? contenders
      : contenders.filter((c) =>
          args.filter?.some((f) => (f.startsWith('=') ? c.id === f.slice(1) : c.id.includes(f))),
        );
  const bench = await startBenchServer();
  const startedAt = new Date();
  let results: Results = {
    date: startedAt.toISOString(),
    quick: args.quick,
    machine: machine(bench.version),
    versions: versions(ROOT),
    settings,
  };
  try {
    const client = bench.client;
    const sluice = SLUICE_POLICIES.map((policy) => sluiceRedis(client, policy));
    const peers = peersOnRedis(client);
    const raceOptions = { ...settings, identifiers, log };
    if (args.only.has('redis')) {
      log('Throughput, latency and Redis-side cost on Redis');
      // Coalescing off, for the two cheapest scripts: what one call per decision costs sluice.
      const single = ['fixedWindow', 'gcra'].map((label) =>
        sluiceRedis(client, SLUICE_POLICIES.find((p) => p.label === label) as SluicePolicy, 1),
      );
      const contenders: Contender[] = [...sluice, ...single, ...peers, seedReference(client)];
      results = { ...results, redis: await race(bench, chosen(contenders), raceOptions) };
    }
    if (args.only.has('batch')) {
      log('Coalescing: maxBatch');
      const gcraPolicy = SLUICE_POLICIES.find((p) => p.label === 'gcra') as SluicePolicy;
      const sizes = MAX_BATCH_SIZES.map((size) => sluiceRedis(client, gcraPolicy, size));
      const batchOptions = {
        ...raceOptions,
        rounds: args.quick ? 1 : 2,
        durationMs: args.quick ? 700 : 1500,
      };
      results = { ...results, batch: await race(bench, chosen(sizes), batchOptions) };
    }
    if (args.only.has('memory')) {
      log('Redis memory per identifier');
      const memory = [];
      // Day-long periods: one decision's state must outlive the section (a 1-minute GCRA forgets an identifier after 60 ms).
      const day = 86_400_000;
      // GCRA keeps a TAT of whole microseconds as an integer; 7 per day has an interval that is not one.
      const uneven: SluicePolicy = {
        label: 'gcra (7 per day: a decimal TAT)',
        kind: 'gcra',
        make: (w = day) => gcra({ limit: 7, periodMs: w }),
      };
      const longLived = [
        ...[...SLUICE_POLICIES, uneven].map((policy) => sluiceRedis(client, policy, undefined, day)),
        ...peersOnRedis(client, day),
      ];
      for (const contender of chosen(longLived)) {
        const record = await memoryPerIdentifier(bench, contender, identifiers, args.quick ? 200 : 1000);
        log(`  ${contender.id.padEnd(34)} ${record.bytesPerIdentifier.toFixed(1)} bytes/identifier`);
        memory.push(record);
      }
      results = { ...results, memory, slidingLogEntry: await slidingLogPerEntry(bench) };
    }
    if (args.only.has('memory-store')) {
      log('Memory store');
      // Short and many rounds (in-process figures move most with the machine's load), each run in a
      // process of its own.
      const memoryOptions = {
        ...raceOptions,
        rounds: args.quick ? 1 : MEMORY_STORE_ROUNDS,
        durationMs: args.quick ? 700 : 1000,
        warmupMs: 300,
      };
      results = {
        ...results,
        memoryStore: await race(bench, chosen(memoryContenders()), {
          ...memoryOptions,
          measure: (contender, round) => measureInChild(contender, round, memoryOptions),
        }),
      };
    }
    if (args.only.has('deny-cache')) {
      log('Deny cache');
      const denyCache = [await denyCacheSaving(bench, 1), await denyCacheSaving(bench, settings.concurrency)];
      for (const row of denyCache) log(`  ${JSON.stringify(row)}`);
      results = { ...results, denyCache };
    }
    if (args.only.has('fairness')) {
      log('Hot and cold keys');
      // @upstash/ratelimit answers denied identifiers from its ephemeral cache by default; sluice's
      // deny cache is opt-in: both ways are shown.
      const cached = ['fixedWindow', 'gcra'].map((label) =>
        sluiceRedis(
          client,
          SLUICE_POLICIES.find((p) => p.label === label) as SluicePolicy,
          undefined,
          WINDOW_MS,
          true,
        ),
      );
      const fair = chosen([...sluice, ...cached, ...peers]);
      const fairOptions = {
        ...raceOptions,
        rounds: args.quick ? 1 : 2,
        durationMs: args.quick ? 700 : 1500,
        warmupMs: args.quick ? 200 : 500,
      };
      results = { ...results, fairness: await fairness(bench, fair, fairOptions) };
    }
  } finally {
    await bench.close();
  }
  results = { ...results, targets: computeTargets(results) };
  for (const target of results.targets ?? []) {
    log(`${target.met === null ? '  ?' : target.met ? ' ok' : 'NOT'}  ${target.target}: ${target.measured}`);
  }
  const complete = args.filter === undefined && SECTIONS.every((section) => args.only.has(section));
  if (args.quick || !complete) {
    log('Quick or partial run: results printed only, BENCHMARKS.md left as it was.');
    return;
  }
  const dir = join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const resultsPath = join('bench', 'results', `${startedAt.toISOString().slice(0, 10)}.json`);
  writeFileSync(join(ROOT, resultsPath), `${JSON.stringify(results, null, 2)}\n`);
  writeReport(results, resultsPath);
  log(`Wrote ${resultsPath} and BENCHMARKS.md`);
}

main().then(
  // Peers leave timers behind (RateLimiterMemory keeps one per key): the run is over, so exit.
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
