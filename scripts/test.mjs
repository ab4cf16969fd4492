// `npm test`: installs redis-server when missing, builds the tests with tsc, and runs every suite with node:test.
// SLUICE_TEST_SERVER=valkey runs them on Valkey 8.0.1 instead, unpacked by scripts/ensure-valkey.sh.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { buildState } from './build-state.mjs';
import { serverReach } from './server-suites.mjs';

function run(command, args) {
  const result = spawnSync(command, args, { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

// The suites start real servers and a real browser: install them from Debian's packages when missing.
run('bash', ['scripts/ensure-redis.sh']);
run('bash', ['scripts/ensure-chromium.sh']);
run('bash', ['scripts/ensure-grpc-clients.sh']);
run('bash', ['scripts/ensure-promtool.sh']);
if (process.env.SLUICE_TEST_SERVER === 'valkey') {
  // Valkey lives in a private folder (no system service): put its binaries first on the suites' PATH.
  const valkey = spawnSync('bash', ['scripts/ensure-valkey.sh'], { stdio: ['ignore', 'pipe', 'inherit'] });
  if (valkey.status !== 0) process.exit(valkey.status ?? 1);
  process.env.PATH = `${valkey.stdout.toString().trim()}${delimiter}${process.env.PATH ?? ''}`;
}
// SLUICE_TEST_BUILT=1: the runtime matrix (scripts/matrix.mjs) compiled the suites once for all its runs.
if (process.env.SLUICE_TEST_BUILT !== '1') {
  run('node', ['scripts/gen-scripts.mjs']);
  // A suite moved or deleted in the checkout would otherwise still run from its old compiled file.
  rmSync(join('build', 'test'), { recursive: true, force: true });
  run('npx', ['tsc', '-p', 'tsconfig.json']);
  // The Nest suites compile on their own, with the decorator settings Nest needs (see their tsconfig.json).
  run('npx', ['tsc', '-p', 'test/http/nestjs/tsconfig.json']);
}

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return find(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

// Filter with: npm test -- <substring> ...
const filters = process.argv.slice(2);
const matched = find('build/test')
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
if (matched.length === 0) {
  console.error('No test files matched.');
  process.exit(1);
}
// On Valkey, only the suites that start a server: the others (pure TypeScript, in-process services,
// packaging) do not depend on the server, and run the same on the Redis pass. SLUICE_TEST_ALL=1 runs them too.
const startsServer = serverReach(join('build', 'test'));
const serverOnly = process.env.SLUICE_TEST_SERVER === 'valkey' && process.env.SLUICE_TEST_ALL !== '1';
const files = serverOnly ? matched.filter(startsServer) : matched;
if (files.length < matched.length) {
  const skipped = matched
    .filter((f) => !files.includes(f))
    .map((f) => f.slice(join('build', 'test').length + 1));
  console.log(
    `Skipped on Valkey, ${skipped.length} suites that start no server (they run the same on Redis; SLUICE_TEST_ALL=1 runs them): ${skipped.join(', ')}`,
  );
}
if (files.length === 0) process.exit(0);
// The package suites pack dist/ and packages/server/dist/: build them here when older than the sources, once,
// rather than in two suites running side by side and writing over each other.
if (files.some((f) => f.includes(join('build', 'test', 'package')))) {
  if (!buildState().current) run('npm', ['run', 'build', '--silent']);
}
// Files under test/quiet/ measure time on the server (SLOWLOG): they run last and alone, so that the
// other suites' load on this machine does not stall the server they watch.
const quiet = files.filter((f) => f.includes(`${join('build', 'test', 'quiet')}`));
const busy = files.filter((f) => !quiet.includes(f));
// Every failure is also written to build/test-failures/<group>.jsonl (scripts/failures-reporter.mjs), so that the
// end of the run can name it, however long the output above it.
const reporter = new URL('./failures-reporter.mjs', import.meta.url).pathname;
const failuresDir = join('build', 'test-failures');
rmSync(failuresDir, { recursive: true, force: true });
mkdirSync(failuresDir, { recursive: true });
const options = (destination) => [
  '--test',
  '--test-timeout=300000',
  '--test-reporter=spec',
  '--test-reporter-destination=stdout',
  `--test-reporter=${reporter}`,
  `--test-reporter-destination=${destination}`,
];
/** The failures a run wrote, each file relative to the checkout (as the report and the closing lines name it). */
function failuresIn(destination) {
  if (!existsSync(destination)) return [];
  return readFileSync(destination, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line))
    .map((f) => ({ ...f, file: (f.file ?? '').replace(`${process.cwd()}/`, '') }));
}
const failures = [];
let failed = false;
for (const [name, group, concurrency] of [
  ['busy', busy, 2],
  ['quiet', quiet, 1],
]) {
  if (group.length === 0) continue;
  const destination = join(failuresDir, `${name}.jsonl`);
  const result = spawnSync('node', [...options(destination), `--test-concurrency=${concurrency}`, ...group], {
    stdio: 'inherit',
  });
  if (result.status !== 0) failed = true;
  failures.push(...failuresIn(destination));
}

// A failure is reported by name at the very end, with its file: a CI log is often read from its tail.
// The files that failed run once more, each alone on a quiet machine (at most RETRY_FILES of them: more is a
// breakage, not noise). A test that fails alone too fails the run; one that passes alone is reported as
// FLAKY, by name, and the run passes. SLUICE_TEST_RETRY=0 turns the second run off.
const RETRY_FILES = 3;
const failedFiles = [...new Set(failures.map((f) => f.file).filter((f) => f !== ''))];
const report = { failures, retried: [], flaky: [], stillFailing: [] };
if (failed && failures.length > 0) {
  console.log('\n✖ failed in this run:');
  for (const f of failures.filter((f) => !f.suite))
    console.log(`✖ ${f.name} (${f.file})${f.message ? `: ${f.message}` : ''}`);
  const retry = process.env.SLUICE_TEST_RETRY !== '0' && failedFiles.length <= RETRY_FILES;
  if (retry) {
    let again = false;
    for (const file of failedFiles) {
      console.log(`\n↻ ${file} again, alone (its output indented, not counted in the totals above):`);
      const destination = join(failuresDir, `retry-${report.retried.length}.jsonl`);
      const result = spawnSync('node', [...options(destination), '--test-concurrency=1', file], {
        stdio: ['ignore', 'pipe', 'pipe'],
        maxBuffer: 64 * 1024 * 1024,
      });
      const indented = `${result.stdout}${result.stderr}`.replace(/^/gm, '  │ ');
      process.stdout.write(`${indented}\n`);
      report.retried.push(file);
      if (result.status !== 0) {
        again = true;
        report.stillFailing.push(...failuresIn(destination).filter((f) => !f.suite));
      }
    }
    if (!again) {
      report.flaky = failures.filter((f) => !f.suite);
      failed = false;
      console.log('\n⚠ FLAKY: failed in the run above and passed when its file ran again alone:');
      for (const f of report.flaky) console.log(`⚠ FLAKY ${f.name} (${f.file})`);
    } else {
      console.log('\n✖ failed again, alone:');
      for (const f of report.stillFailing) console.log(`✖ ${f.name} (${f.file})`);
    }
  }
}
writeFileSync(join(failuresDir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
process.exit(failed ? 1 : 0);
