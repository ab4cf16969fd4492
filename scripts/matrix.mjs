// The runtime matrix CI runs: the whole suite on the newest Node.js LTS line, the suites that can differ between
// runtimes on every other supported Node.js line, on Bun and on Deno. Writes build/matrix/results.json.
// `node scripts/matrix.mjs [id...]` runs the named legs only (ids from scripts/runtimes.mjs); `--list` prints the plan;
// `--files` prints the compiled suites each group selects from the last build (to check a move of test files).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { install, versionOf } from './runtimes.mjs';

/**
 * Groups of suites, each named by substrings of its compiled test files (build/test/...): paths of
 * the library's sources may move, the suites' names stay. `label` is what the README's table says.
 */
export const GROUPS = {
  full: { label: 'the whole suite on Redis and on Valkey', match: [] },
  differential: {
    label: "the algorithms' differential (memory store against Redis, each client library)",
    match: ['algorithms/differential.test'],
  },
  adapters: {
    label:
      'every HTTP adapter (Express, Fastify, Koa, NestJS, `node:http`, fetch, Hono), in memory and on Redis',
    match: ['http/'],
  },
  service: { label: 'the `sluice serve` decision service', match: ['service/serve.test'] },
  envoy: { label: "Envoy's gRPC rate limit service", match: ['envoy/limits.test'] },
  install: { label: 'installing the packed packages', match: ['package/install.test'] },
  memory: { label: 'the memory store', match: ['stores/memory.test'] },
  redis: {
    label: 'the Redis store (ioredis, node-redis, iovalkey, Valkey GLIDE)',
    match: ['stores/redis.test'],
  },
  fetchHono: {
    label: '`sluice/fetch` and `sluice/hono` (conformance)',
    match: ['http/fetch.test', 'http/hono.test'],
  },
  allocations: {
    label: 'the bytes an in-process decision and a ShouldRateLimit call allocate',
    match: ['metrics/allocations.test', 'envoy/allocations.test'],
  },
  served: {
    label: "`sluice/fetch` and `sluice/hono` served by the runtime's own server, on Redis",
    match: ['runtimes/serve.test'],
  },
};

// The slow multi-process scenarios (cluster failovers, fleets, load) run once, in the main line's whole suite.
// The bytes a decision allocates depend on what each V8 inlines: a change can hold on one line and not on another.
const OTHER_LINES = ['differential', 'adapters', 'service', 'envoy', 'install', 'allocations', 'served'];
const OTHER_RUNTIMES = ['memory', 'redis', 'differential', 'fetchHono', 'served'];

/** Legs in the order they run; `main` is the newest LTS line, whose run is the README's `npm test`. */
export const LEGS = [
  { id: 'node26', main: true, runs: [{ server: 'redis' }, { server: 'valkey' }], groups: ['full'] },
  { id: 'node24', runs: [{ server: 'redis' }], groups: OTHER_LINES },
  { id: 'node22', runs: [{ server: 'redis' }], groups: OTHER_LINES },
  { id: 'node20', runs: [{ server: 'redis' }], groups: OTHER_LINES },
  { id: 'bun', runs: [{ server: 'redis' }], groups: OTHER_RUNTIMES },
  { id: 'deno', runs: [{ server: 'redis' }], groups: OTHER_RUNTIMES },
];

function compiledTests(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return compiledTests(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

function substrings(groups) {
  return groups.flatMap((group) => GROUPS[group].match);
}

/** Runs a command, its output passed through and kept for the summary; resolves with status and output. */
function run(command, args, env) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (stream, to) =>
      stream.on('data', (chunk) => {
        to.write(chunk);
        output += chunk.toString();
      });
    keep(child.stdout, process.stdout);
    keep(child.stderr, process.stderr);
    child.on('close', (status) => resolve({ status: status ?? 1, output }));
  });
}

// The closing lines of each runner (colour codes removed): node:test's "ℹ pass N", bun's " N pass",
// deno's "ok | N passed (M steps) | K failed". Deno counts a describe as a test and its tests as steps.
const COLOUR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
const plain = (text) => text.replace(COLOUR, '');
function sum(text, pattern) {
  return [...plain(text).matchAll(pattern)].reduce((total, match) => total + Number(match[1]), 0);
}
export function countsOf(runtime, output) {
  if (runtime === 'node') {
    return {
      tests: sum(output, /^ℹ tests (\d+)$/gm),
      passed: sum(output, /^ℹ pass (\d+)$/gm),
      failed: sum(output, /^ℹ fail (\d+)$/gm) + sum(output, /^ℹ cancelled (\d+)$/gm),
      skipped: sum(output, /^ℹ skipped (\d+)$/gm) + sum(output, /^ℹ todo (\d+)$/gm),
    };
  }
  if (runtime === 'bun') {
    const passed = sum(output, /^\s*(\d+) pass$/gm);
    const failed = sum(output, /^\s*(\d+) fail$/gm);
    const skipped = sum(output, /^\s*(\d+) skip$/gm) + sum(output, /^\s*(\d+) todo$/gm);
    return { tests: passed + failed + skipped, passed, failed, skipped };
  }
  // Deno: the steps are the tests inside describe() blocks, the leaves as node:test counts them.
  const summary =
    /^(?:ok|FAILED) \| (\d+) passed(?: \((\d+) steps?\))? \| (\d+) failed(?: \((\d+) steps?\))?(?: \| (\d+) ignored)?/m.exec(
      plain(output),
    );
  if (summary === null) return { tests: 0, passed: 0, failed: 0, skipped: 0 };
  const passed = Number(summary[2] ?? summary[1]);
  const failed = Number(summary[4] ?? summary[3]);
  const skipped = Number(summary[5] ?? 0);
  return { tests: passed + failed + skipped, passed, failed, skipped };
}

/** The tests once compiled for every leg: the README's `npm test` would build them again per run. */
function buildTests() {
  for (const [command, args] of [
    ['node', ['scripts/gen-scripts.mjs']],
    ['node', ['-e', "require('node:fs').rmSync('build/test', { recursive: true, force: true })"]],
    ['npx', ['tsc', '-p', 'tsconfig.json']],
    ['npx', ['tsc', '-p', 'test/http/nestjs/tsconfig.json']],
  ]) {
    const result = spawnSync(command, args, { stdio: 'inherit' });
    if (result.status !== 0) process.exit(result.status ?? 1);
  }
}

async function runLeg(leg, runtime) {
  const results = [];
  for (const { server } of leg.runs) {
    // The runtime's folder first on PATH: `node` and the npx the suites spawn are this line's.
    const env = {
      ...process.env,
      PATH: `${dirname(runtime.path)}${delimiter}${process.env.PATH}`,
      SLUICE_TEST_BUILT: '1',
    };
    if (server === 'valkey') env.SLUICE_TEST_SERVER = 'valkey';
    else delete env.SLUICE_TEST_SERVER;
    const filters = substrings(leg.groups);
    const files = compiledTests(join('build', 'test'))
      .filter((f) => filters.some((s) => f.includes(s)))
      .sort();
    let command;
    let args;
    if (runtime.runtime === 'node') [command, args] = [runtime.path, ['scripts/test.mjs', ...filters]];
    else if (runtime.runtime === 'bun')
      [command, args] = [runtime.path, ['test', '--timeout=300000', ...files.map((f) => `./${f}`)]];
    else [command, args] = [runtime.path, ['test', '--allow-all', ...files]];
    console.log(`\n== ${leg.id} ${runtime.version} on ${server}: ${leg.groups.join(', ')}`);
    const started = Date.now();
    const { status, output } = await run(command, args, env);
    const counts = countsOf(runtime.runtime, output);
    // scripts/test.mjs names each failure, and runs the failed files once more alone: a test that then
    // passes is FLAKY (reported by name, not failed); one that fails again fails the leg.
    const report = runtime.runtime === 'node' ? reportOf() : undefined;
    const flaky = status === 0 && report !== undefined ? report.flaky : [];
    if (flaky.length > 0) {
      counts.passed += counts.failed;
      counts.failed = 0;
    }
    const failures = status === 0 ? [] : (report?.failures ?? []).filter((f) => !f.suite);
    results.push({
      id: leg.id,
      runtime: runtime.runtime,
      line: runtime.line,
      version: runtime.version,
      main: leg.main === true,
      server,
      groups: leg.groups,
      files: leg.main === true ? undefined : files.length,
      ...counts,
      seconds: Math.round((Date.now() - started) / 1000),
      flaky: flaky.map(named),
      failures: failures.map(named),
      ok: status === 0 && counts.failed === 0 && counts.tests > 0,
    });
  }
  return results;
}

const RESULTS = join('build', 'matrix', 'results.json');

/** What scripts/test.mjs wrote of the run's failures, or nothing for a runner that writes none. */
function reportOf() {
  try {
    return JSON.parse(readFileSync(join('build', 'test-failures', 'report.json'), 'utf8'));
  } catch {
    return undefined;
  }
}
const named = (f) => `${f.name} (${f.file})`;

async function main() {
  const args = process.argv.slice(2);
  if (args.includes('--list')) {
    for (const leg of LEGS)
      console.log(`${leg.id}\t${leg.runs.map((r) => r.server).join('+')}\t${leg.groups.join(', ')}`);
    return;
  }
  if (args.includes('--files')) {
    const compiled = compiledTests(join('build', 'test')).sort();
    for (const [name, { match }] of Object.entries(GROUPS)) {
      for (const file of compiled.filter((f) => match.length === 0 || match.some((s) => f.includes(s))))
        console.log(`${name}\t${file}`);
    }
    return;
  }
  const chosen = args.length === 0 ? LEGS : LEGS.filter((leg) => args.includes(leg.id));
  if (chosen.length === 0) throw new Error(`No leg named ${args.join(', ')}: node scripts/matrix.mjs --list`);
  buildTests();
  const results = [];
  for (const leg of chosen) {
    const runtime = install(leg.id);
    runtime.version = versionOf(runtime.path);
    results.push(...(await runLeg(leg, runtime)));
  }
  mkdirSync(dirname(RESULTS), { recursive: true });
  // A partial run keeps the other legs' last results, so that the README's table can be written from them.
  let kept = [];
  try {
    kept = JSON.parse(readFileSync(RESULTS, 'utf8')).filter((r) => !chosen.some((leg) => leg.id === r.id));
  } catch {}
  const all = [...kept, ...results].sort(
    (a, b) => LEGS.findIndex((l) => l.id === a.id) - LEGS.findIndex((l) => l.id === b.id),
  );
  writeFileSync(RESULTS, `${JSON.stringify(all, null, 2)}\n`);
  console.log('\nRuntime matrix (this run):');
  console.log('leg\tversion\tserver\ttests\tpassed\tfailed\tskipped\tseconds\tsuites');
  for (const r of results) {
    console.log(
      `${r.id}\t${r.version}\t${r.server}\t${r.tests}\t${r.passed}\t${r.failed}\t${r.skipped}\t${r.seconds}\t${r.groups.join(', ')}${r.ok ? '' : '\tFAILED'}`,
    );
  }
  const failed = results.filter((r) => !r.ok);
  for (const r of results)
    for (const name of r.flaky ?? []) console.log(`FLAKY: ${r.id} on ${r.server}: ${name}, passed alone`);
  for (const r of failed) {
    console.log(`FAILED: ${r.id} ${r.version} on ${r.server}`);
    for (const name of r.failures ?? []) console.log(`  ✖ ${name}`);
  }
  // Every leg's tests added up, in the closing line a CI log is read for.
  const total = (field) => results.reduce((n, r) => n + r[field], 0);
  console.log(`${total('passed')} passed, ${total('failed')} failed, ${total('skipped')} skipped`);
  if (failed.length > 0) process.exit(1);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
