// `npm test`: installs redis-server when missing, builds the tests with tsc, and runs every suite with node:test.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function run(command, args) {
  const result = spawnSync(command, args, { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

// The suites start real servers: install them from Debian's packages when missing.
run('bash', ['scripts/ensure-redis.sh']);
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
run('node', ['--test', '--test-reporter=spec', '--test-concurrency=2', '--test-timeout=300000', ...files]);
