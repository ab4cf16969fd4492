// `npm run bench`: races sluice against its peers and its floors on a redis-server of its own, writes
// bench/results/<date>.json and regenerates BENCHMARKS.md. Not a test: it never runs in CI.
//
//   npm run bench                      the full run (about 10 minutes), writes the results and BENCHMARKS.md
//   npm run bench -- --quick           one short round of everything (about 2 minutes), printed only
//   npm run bench -- --only redis,memory-store   some sections (names: see --help)
//   npm run bench -- --filter gcra,=rlf.RateLimiterRedis   only these contenders (substring, or =exact id)
//   npm run bench -- --report <file>   regenerates BENCHMARKS.md from a results file, without a run
//   npm run bench -- --report <file> --check   writes nothing; fails when BENCHMARKS.md (or a file a section
//                                      writes) is not what that file and bench/notes.md give (as a test runs it)
//   npm run bench -- --only service-load --merge   measures some sections again and merges them into the
//                                      newest results file (each marked with its own date, load and commit),
//                                      then regenerates BENCHMARKS.md
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Contender } from './contenders.js';
import { LIMIT, WINDOW_MS } from './contenders.js';
import { denyCacheSection } from './deny-cache.js';
import { fairnessSection } from './fairness.js';
import { machine, versions } from './machine.js';
import { memorySection } from './memory.js';
import { memoryStoreSection } from './memory-store.js';
import { profileSection } from './profile.js';
import { batchSection, redisSection } from './redis.js';
import { computeTargets, renderMarkdown } from './report.js';
import { scalingSection } from './scaling.js';
import type { Results, Section, Settings } from './section.js';
import { startBenchServer } from './server.js';
import { serviceSection } from './service.js';

/** The built-in sections, in the order they run and appear in BENCHMARKS.md. */
const BUILT_IN: readonly Section[] = [
  redisSection as Section,
  batchSection as Section,
  memorySection as Section,
  memoryStoreSection as Section,
  scalingSection as Section,
  serviceSection as Section,
  profileSection as Section,
  denyCacheSection as Section,
  fairnessSection as Section,
];

/**
 * Files that plug sections in when they exist (bench/<name>.ts exporting `section` or `sections`;
 * see bench/section.ts): they run after the built-in ones.
 */
const OPTIONAL_SECTIONS = [
  'envoy',
  'metrics',
  'clients',
  'charge',
  'llm',
  'overrides',
  'throttle',
  'leases',
  'service-load',
] as const;

const ROOT = process.cwd();
const NOTES = join('bench', 'notes.md');
const HERE = dirname(fileURLToPath(import.meta.url));

async function optionalSections(log: (line: string) => void): Promise<Section[]> {
  const found: Section[] = [];
  for (const name of OPTIONAL_SECTIONS) {
    const file = join(HERE, `${name}.js`);
    if (!existsSync(file)) continue;
    // A script written to run alone may do its work on import: only modules that export a section
    // are imported.
    if (!/^export const sections?\b/m.test(readFileSync(file, 'utf8'))) {
      log(`bench/${name}.ts exports no \`section\` (see bench/section.ts): not run`);
      continue;
    }
    const module = (await import(file)) as { section?: Section; sections?: readonly Section[] };
    if (module.section !== undefined) found.push(module.section);
    if (module.sections !== undefined) found.push(...module.sections);
  }
  return found;
}

interface Args {
  readonly quick: boolean;
  readonly only: Set<string> | undefined;
  readonly filter: readonly string[] | undefined;
  readonly report?: string;
  readonly merge: boolean;
  /** With `report`: compare instead of writing. */
  readonly check: boolean;
}

function parseArgs(argv: readonly string[], names: readonly string[]): Args {
  const quick = argv.includes('--quick');
  const merge = argv.includes('--merge');
  const value = (flag: string): string | undefined => {
    const at = argv.indexOf(flag);
    return at === -1 ? undefined : (argv[at + 1] ?? '');
  };
  const filter = value('--filter')?.split(',');
  const onlyText = value('--only');
  let only: Set<string> | undefined;
  if (onlyText !== undefined) {
    only = new Set(onlyText.split(','));
    for (const name of only) {
      if (!names.includes(name)) {
        throw new Error(`Expected --only to list sections among ${names.join(', ')}, got "${name}".`);
      }
    }
  }
  const report = value('--report');
  const check = argv.includes('--check');
  if (check && report === undefined) throw new Error('Expected --check with --report <results file>.');
  return report === undefined
    ? { quick, only, filter, merge, check }
    : { quick, only, filter, report, merge, check };
}

function settingsFor(quick: boolean): Settings {
  return {
    rounds: quick ? 1 : 4,
    warmupMs: quick ? 300 : 500,
    durationMs: quick ? 1000 : 2000,
    concurrency: 200,
    identifiers: 10_000,
    limit: LIMIT,
    windowMs: WINDOW_MS,
  };
}

async function main(): Promise<void> {
  const sections = [...BUILT_IN, ...(await optionalSections((line) => console.log(line)))];
  const names = sections.map((s) => s.name);
  const args = parseArgs(process.argv.slice(2), names);
  /** BENCHMARKS.md and the files the sections write (plots), by path from the root. */
  const reportFiles = (results: Results, resultsPath: string): Map<string, string> => {
    const files = new Map([
      ['BENCHMARKS.md', renderMarkdown(results, sections, resultsPath, join(ROOT, NOTES))],
    ]);
    for (const section of sections) {
      const result = results.sections[section.name];
      if (result === undefined || section.files === undefined) continue;
      for (const [path, text] of Object.entries(section.files(result, results))) files.set(path, text);
    }
    return files;
  };
  const writeReport = (results: Results, resultsPath: string): void => {
    for (const [path, text] of reportFiles(results, resultsPath)) {
      mkdirSync(dirname(join(ROOT, path)), { recursive: true });
      writeFileSync(join(ROOT, path), text);
    }
  };
  if (args.report !== undefined) {
    const results = JSON.parse(readFileSync(join(ROOT, args.report), 'utf8')) as Results;
    if (args.check) {
      const stale = [...reportFiles(results, args.report)].filter(([path, text]) => {
        const file = join(ROOT, path);
        return !existsSync(file) || readFileSync(file, 'utf8') !== text;
      });
      for (const [path] of stale) console.error(`${path} is not what ${args.report} and ${NOTES} give`);
      if (stale.length > 0) {
        console.error(`Regenerate it: npm run bench -- --report ${args.report}`);
        process.exitCode = 1;
      } else console.log(`BENCHMARKS.md is what ${args.report} and ${NOTES} give`);
      return;
    }
    writeReport(results, args.report);
    console.log(`BENCHMARKS.md regenerated from ${args.report}`);
    return;
  }
  const settings = settingsFor(args.quick);
  const log = (line: string) => console.log(line);
  const filter = args.filter;
  const chosen = (contenders: Contender[]): Contender[] =>
    filter === undefined
      ? contenders
      : contenders.filter((c) =>
          filter.some((f) => (f.startsWith('=') ? c.id === f.slice(1) : c.id.includes(f))),
        );
  const bench = await startBenchServer();
  const startedAt = new Date();
  const measured: Record<string, unknown> = {};
  const base = {
    date: startedAt.toISOString(),
    quick: args.quick,
    machine: machine(bench.version),
    versions: versions(ROOT),
    settings,
  };
  const context = {
    quick: args.quick,
    settings,
    bench,
    chosen,
    filtered: filter !== undefined,
    log,
    root: ROOT,
  };
  try {
    for (const section of sections) {
      if (args.only !== undefined && !args.only.has(section.name)) continue;
      const started = performance.now();
      measured[section.name] = await section.run(context);
      log(`  (${section.name}: ${((performance.now() - started) / 1000).toFixed(0)} s)`);
    }
  } finally {
    await bench.close();
  }
  let results: Results = { ...base, sections: measured };
  results = { ...results, targets: computeTargets(results, sections) };
  for (const target of results.targets ?? []) {
    log(`${target.met === null ? '  ?' : target.met ? ' ok' : 'NOT'}  ${target.target}: ${target.measured}`);
  }
  const complete = filter === undefined && args.only === undefined;
  if (args.merge && !args.quick && filter === undefined && args.only !== undefined) {
    mergeInto(results, writeReport, log);
    return;
  }
  if (args.quick || !complete) {
    const dir = join(ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'last-partial.json.tmp'), `${JSON.stringify(results, null, 2)}\n`);
    log(
      'Quick or partial run: results printed (and kept in bench/results/last-partial.json.tmp), BENCHMARKS.md left as it was.',
    );
    return;
  }
  const dir = join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const resultsPath = join('bench', 'results', `${startedAt.toISOString().slice(0, 10)}.json`);
  writeFileSync(join(ROOT, resultsPath), `${JSON.stringify(results, null, 2)}\n`);
  writeReport(results, resultsPath);
  log(`Wrote ${resultsPath} and BENCHMARKS.md`);
}

/**
 * Merges a partial run's sections into the newest results file: each merged section keeps its own date,
 * load average and commit under `remeasured`, which BENCHMARKS.md names; the rest stays as measured.
 */
function mergeInto(
  results: Results,
  writeReport: (results: Results, path: string) => void,
  log: (line: string) => void,
): void {
  const dir = join(ROOT, 'bench', 'results');
  const newest = readdirSync(dir)
    .filter((name) => /^\d{4}-\d{2}-\d{2}\.json$/.test(name))
    .sort()
    .at(-1);
  if (newest === undefined) throw new Error('--merge: no results file in bench/results to merge into');
  const path = join('bench', 'results', newest);
  const base = JSON.parse(readFileSync(join(ROOT, path), 'utf8')) as Results;
  const stamp = {
    date: results.date,
    loadAverageAtStart: results.machine.loadAverageAtStart,
    commit: results.versions.commit ?? 'unknown',
  };
  const remeasured = { ...base.remeasured };
  for (const name of Object.keys(results.sections)) remeasured[name] = stamp;
  const merged: Results = {
    ...base,
    sections: { ...base.sections, ...results.sections },
    remeasured,
  };
  writeFileSync(join(ROOT, path), `${JSON.stringify(merged, null, 2)}\n`);
  writeReport(merged, path);
  log(`Merged ${Object.keys(results.sections).join(', ')} into ${path}; BENCHMARKS.md regenerated`);
}

main().then(
  // Peers leave timers behind (RateLimiterMemory keeps one per key): the run is over, so exit.
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
