// `npm install` of the packed tarballs in fresh folders, as users would: the library alone (one package, no install
// script, at most 2.4 MB, every subpath in ESM and CommonJS with its types), the service from the server package, and
// arethetypeswrong and publint on both.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EnvoyClient, FIXTURES, OK } from '../helpers/envoy/client.js';
import { type Packed, packBoth } from '../helpers/packed.js';
import { ROOT } from '../helpers/paths.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

/** What `npm install sluice` may add to an application, in bytes of files. */
// 2.4 MB: the library with sluice/shed and the server's sluice/internal (2,112,827 bytes when they came), then
// takeUpTo, the deny cache's per-operation cost and the split option steps (2,259,836 bytes on 2026-12-07).
const MAX_LIBRARY_BYTES = 2_400_000;
const BIN = join(ROOT, 'node_modules', '.bin');

interface Ran {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Text without the terminal's colour codes, which some tools print even when told not to. */
function plain(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the escape character is what a colour code starts with
  return text.replace(/\x1b\[[0-9;]*m/g, '');
}

/** Runs a command to its end without blocking the others: the installs and the checks below run side by side. */
function run(command: string, args: readonly string[], cwd?: string): Promise<Ran> {
  return new Promise((resolve) => {
    // No colour, whatever the caller's terminal asks for: the checks below read the tools' words.
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' };
    delete env.CLICOLOR_FORCE;
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', (error) => resolve({ status: null, stdout, stderr: `${stderr}${error}` }));
    child.once('close', (status) => resolve({ status, stdout: plain(stdout), stderr: plain(stderr) }));
  });
}

interface Installed {
  /** The application's folder. */
  readonly dir: string;
  /** npm's `warn` lines. */
  readonly warnings: string[];
  /** Every package npm put under node_modules, by path (`sluice`, `@grpc/grpc-js`...). */
  readonly packages: string[];
  /** Those with an install script. */
  readonly withInstallScripts: string[];
}

const folders: string[] = [];

/** An empty application that runs `npm install <tarball> [others...]`, as a user would. */
async function install(tarball: string, name: string, others: readonly string[] = []): Promise<Installed> {
  const dir = mkdtempSync(join(tmpdir(), `sluice-${name}-`));
  folders.push(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }));
  // --prefer-offline: packages npm already has in its cache are taken from there, unrevalidated.
  const result = await run(
    'npm',
    ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, ...others],
    dir,
  );
  const output = `${result.stdout}${result.stderr}`;
  assert.equal(result.status, 0, output);
  const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { hasInstallScript?: boolean }>;
  };
  const entries = Object.entries(lock.packages).filter(([path]) => path.startsWith('node_modules/'));
  const short = (path: string): string => path.slice('node_modules/'.length);
  return {
    dir,
    warnings: output.split('\n').filter((line) => /^npm warn/i.test(line)),
    packages: entries.map(([path]) => short(path)),
    withInstallScripts: entries.filter(([, entry]) => entry.hasInstallScript === true).map(([p]) => short(p)),
  };
}

function bytesUnder(path: string): number {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return stat.size;
  return readdirSync(path).reduce((sum, name) => sum + bytesUnder(join(path, name)), 0);
}

/** Runs node in `cwd` on a script; returns what it printed, parsed as JSON. */
function nodeJson(cwd: string, args: readonly string[]): unknown {
  const result = spawnSync(process.execPath, args, { cwd, encoding: 'utf8' });
  assert.equal(result.status, 0, result.stderr);
  return JSON.parse(result.stdout);
}

/**
 * Subpaths made of their framework's own code (Nest's decorators and classes), which load only
 * beside it; every other subpath imports its framework's types alone.
 */
const RUNTIME_PEERS: Readonly<Record<string, readonly string[]>> = {
  './nestjs': ['@nestjs/common', '@nestjs/core', 'reflect-metadata', 'rxjs'],
};

/** Those peers as the repository's devDependencies pin them (already in npm's cache after `npm ci`). */
function peersAsPinned(names: readonly string[]): string[] {
  const { devDependencies } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    devDependencies: Record<string, string>;
  };
  return names.map((name) => `${name}@${devDependencies[name] ?? 'latest'}`);
}

/** A tool's verdict on a tarball. */
function lint(tool: 'attw' | 'publint', tarball: string): Promise<Ran> {
  const args =
    tool === 'attw'
      ? [tarball, '--format', 'json', '--no-definitely-typed'] // offline: no lookup of @types packages
      : ['run', tarball, '--strict'];
  return run(join(BIN, tool), args);
}

describe('npm install of the packed packages in a fresh folder', () => {
  let packed: Packed;
  let library: Installed;
  let serverInstall: Promise<Installed>;
  let nestInstall: Promise<Installed>;
  let lints: Promise<[Ran, Ran, Ran, Ran]>;
  /** `.`, `./http`... as package.json's exports name them, and `sluice`, `sluice/http`... as users import them. */
  let subpaths: string[];
  let specifiers: string[];

  before(async () => {
    packed = await packBoth();
    // Side by side: the installs wait on the network and the disk, the checks on the CPU.
    // The server depends on the library of its own version, which the registry would serve: the packed one here.
    serverInstall = install(packed.server.path, 'server-app', [packed.library.path]);
    nestInstall = install(packed.library.path, 'nest-app', peersAsPinned(RUNTIME_PEERS['./nestjs'] ?? []));
    lints = Promise.all([
      lint('attw', packed.library.path),
      lint('attw', packed.server.path),
      lint('publint', packed.library.path),
      lint('publint', packed.server.path),
    ]);
    // Settled here, so that neither rejects unobserved while the library's tests run.
    serverInstall.catch(() => {});
    nestInstall.catch(() => {});
    const list = (await import(new URL('../../../scripts/subpaths.mjs', import.meta.url).href)) as {
      SUBPATHS: Record<string, string>;
    };
    subpaths = Object.keys(list.SUBPATHS);
    specifiers = subpaths.map((subpath) => `sluice${subpath.slice(1)}`);
    library = await install(packed.library.path, 'library-app');
  });
  after(() => {
    packed?.remove();
    for (const dir of folders) rmSync(dir, { recursive: true, force: true });
  });

  test('the library adds one package, runs no install script, warns of nothing and stays within 2.4 MB', (t) => {
    assert.deepEqual(library.packages, ['sluice'], 'npm install sluice adds sluice alone');
    assert.deepEqual(library.withInstallScripts, []);
    assert.deepEqual(library.warnings, []);
    const bytes = bytesUnder(join(library.dir, 'node_modules', 'sluice'));
    t.diagnostic(
      `library: ${packed.library.size} B packed, ${bytes} B installed, ${packed.library.files.length} files`,
    );
    assert.ok(bytes <= MAX_LIBRARY_BYTES, `${bytes} bytes installed`);
  });

  test('every subpath of scripts/subpaths.mjs is exported, and loads with import() and require() alike', () => {
    const installed = JSON.parse(
      readFileSync(join(library.dir, 'node_modules', 'sluice', 'package.json'), 'utf8'),
    ) as { exports: Record<string, unknown> };
    assert.deepEqual(Object.keys(installed.exports), [...subpaths, './package.json']);
    const list = JSON.stringify(specifiers.filter((_, i) => RUNTIME_PEERS[subpaths[i] ?? ''] === undefined));
    const esm = nodeJson(library.dir, [
      '--input-type=module',
      '-e',
      `const names = {}; for (const s of ${list}) names[s] = Object.keys(await import(s)).sort(); console.log(JSON.stringify(names));`,
    ]) as Record<string, string[]>;
    const cjs = nodeJson(library.dir, [
      '-e',
      `const names = {}; for (const s of ${list}) names[s] = Object.keys(require(s)).sort(); console.log(JSON.stringify(names));`,
    ]);
    assert.deepEqual(Object.keys(esm), JSON.parse(list));
    assert.deepEqual(cjs, esm);
    for (const specifier of Object.keys(esm))
      assert.ok(esm[specifier]?.length, `${specifier} exports something`);
  });

  test('sluice/nestjs loads beside Nest installed from the registry, with the same names from import() and require()', async () => {
    const app = await nestInstall;
    const script = (load: string) => `const m = ${load}; console.log(JSON.stringify(Object.keys(m).sort()));`;
    const esm = nodeJson(app.dir, ['--input-type=module', '-e', script("await import('sluice/nestjs')")]);
    const cjs = nodeJson(app.dir, ['-e', script("require('sluice/nestjs')")]);
    assert.deepEqual(cjs, esm);
    for (const name of [
      'SluiceModule',
      'SluiceGuard',
      'RateLimit',
      'SkipRateLimit',
      'SluiceThrottlerStorage',
    ]) {
      assert.ok((esm as string[]).includes(name), name);
    }
  });

  test('an import of every subpath type-checks with its types, from an ES module and from a CommonJS one', () => {
    const lines = specifiers.flatMap((specifier, i) => [
      `import * as subpath${i} from '${specifier}';`,
      `export const names${i}: string[] = Object.keys(subpath${i});`,
      // An unused expectation fails: a subpath whose types resolved to `any` would accept any name.
      '// @ts-expect-error: a name no subpath exports',
      `subpath${i}.notExportedAnywhere;`,
    ]);
    writeFileSync(join(library.dir, 'consumer.mts'), `${lines.join('\n')}\n`);
    writeFileSync(join(library.dir, 'consumer.cts'), `${lines.join('\n')}\n`);
    const compilerOptions = {
      module: 'nodenext',
      moduleResolution: 'nodenext',
      target: 'ES2022',
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ['node'],
      typeRoots: [join(ROOT, 'node_modules', '@types')],
    };
    const config = { compilerOptions, files: ['consumer.mts', 'consumer.cts'] };
    writeFileSync(join(library.dir, 'tsconfig.json'), JSON.stringify(config));
    const result = spawnSync(join(BIN, 'tsc'), ['-p', library.dir], { encoding: 'utf8' });
    assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
  });

  test('arethetypeswrong and publint find no problem in either package', async () => {
    const [types, serverTypes, ...publint] = await lints;
    assert.equal(types.status, 0, `${types.stdout}${types.stderr}`);
    const { analysis } = JSON.parse(types.stdout) as {
      analysis: { entrypoints: object; problems: unknown[] };
    };
    assert.deepEqual(Object.keys(analysis.entrypoints), [...subpaths, './package.json']);
    assert.deepEqual(analysis.problems, []);
    // The server package is a command: nothing to import, so no types to be wrong about.
    assert.equal(serverTypes.status, 0, `${serverTypes.stdout}${serverTypes.stderr}`);
    assert.deepEqual(JSON.parse(serverTypes.stdout), {
      analysis: { packageName: 'sluice-server', packageVersion: packed.server.version, types: false },
    });
    for (const verdict of publint) {
      assert.equal(verdict.status, 0, `${verdict.stdout}${verdict.stderr}`);
      assert.match(verdict.stdout, /^All good!$/m, verdict.stdout);
    }
  });

  describe('the server package', () => {
    let redis: RedisServer;
    let server: Installed;

    before(async () => {
      redis = await startRedis();
      server = await serverInstall;
    });
    after(async () => {
      await redis?.stop();
    });

    test('installs the service with what it needs, the library once among them', (t) => {
      t.diagnostic(
        `server: ${packed.server.size} B packed, ${server.packages.length} packages, ` +
          `${bytesUnder(join(server.dir, 'node_modules'))} B in node_modules, warnings: ${JSON.stringify(server.warnings)}`,
      );
      for (const name of ['sluice-server', '@grpc/proto-loader', 'yaml', 'ioredis', 'prom-client']) {
        assert.ok(server.packages.includes(name), `${name} installed`);
      }
      // gRPC is served on node:http2: no gRPC framework comes with it.
      assert.ok(!server.packages.includes('@grpc/grpc-js'), '@grpc/grpc-js not installed');
      // It builds on the library as a dependency rather than carrying a copy: one `sluice`, at the top.
      assert.deepEqual(
        server.packages.filter((name) => name === 'sluice' || name.endsWith('/sluice')),
        ['sluice'],
      );
      for (const command of ['sluice', 'sluice-server']) {
        const result = spawnSync(join(server.dir, 'node_modules', '.bin', command), ['--version'], {
          encoding: 'utf8',
        });
        assert.deepEqual([result.status, result.stdout], [0, `${packed.server.version}\n`], result.stderr);
      }
    });

    test('npx sluice-server serve answers on HTTP and on Envoy gRPC, with its state in Redis', async () => {
      const service = await startService(server.dir, [
        'serve',
        '--port',
        '0',
        '--grpc-port',
        '0',
        '--redis',
        redis.url,
        '--envoy',
        join(FIXTURES, 'limits.yaml'),
      ]);
      try {
        const decision = await fetch(`${service.http}/v1/limit`, {
          method: 'POST',
          body: JSON.stringify({ policy: 'api', key: 'client-42' }),
        });
        assert.equal(decision.status, 200);
        assert.equal(((await decision.json()) as { allowed: boolean }).allowed, true);
        const client = new EnvoyClient(service.grpc);
        try {
          const answer = await client.shouldRateLimit({
            domain: 'limits',
            descriptors: [{ entries: [{ key: 'user', value: 'installed' }] }],
          });
          assert.equal(answer.overall_code, OK);
          assert.equal(answer.statuses[0]?.limit_remaining, 4);
        } finally {
          client.close();
        }
        // prom-client comes with the package: /metrics counts the decision just made.
        const metrics = await (await fetch(`${service.http}/metrics`)).text();
        assert.match(metrics, /^sluice_decisions_total\{limiter="api",outcome="allowed"\} 1$/m);
      } finally {
        await service.stop();
      }
    });
  });
});

interface Service {
  readonly http: string;
  readonly grpc: string;
  stop(): Promise<void>;
}

/** `npx --no-install sluice-server <args>` in `dir`, in a process group of its own; resolves once both servers listen. */
function startService(dir: string, args: readonly string[]): Promise<Service> {
  const child = spawn('npx', ['--no-install', 'sluice-server', ...args], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    // SIGTERM to the group reaches npm and the service, as Ctrl-C would.
    detached: true,
  });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, 'SIGTERM');
    await exited;
  };
  return new Promise((resolve, reject) => {
    const look = (chunk: Buffer): void => {
      output += chunk.toString();
      const http = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
      const grpc = /grpc:\/\/([\d.]+:\d+)/.exec(output)?.[1];
      if (http !== undefined && grpc !== undefined) resolve({ http, grpc, stop });
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.once('close', (code) => reject(new Error(`sluice-server exited (${code}):\n${output}`)));
  });
}
