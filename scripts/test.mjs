// `npm test`: builds the tests with tsc, checks redis-server is there, and runs every suite with node:test.
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function run(command, args) {
  const result = spawnSync(command, args, { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

try {
  execFileSync('redis-server', ['--version'], { stdio: 'pipe' });
} catch {
  console.error(
    'redis-server is not installed. The tests start real servers: run .ci/run, or apt-get install redis-server redis-sentinel redis-tools.',
  );
  process.exit(1);
}

run('node', ['scripts/gen-scripts.mjs']);
run('npx', ['tsc', '-p', 'tsconfig.json']);

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return find(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

// Filter with: npm test -- <substring> ...
const filters = process.argv.slice(2);
const files = find('build/test')
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
if (files.length === 0) {
  console.error('No test files matched.');
  process.exit(1);
}
run('node', ['--test', '--test-concurrency=2', '--test-timeout=300000', ...files]);
