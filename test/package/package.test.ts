// The packed tarball: what it ships, and that a consumer finds every subpath's types under each moduleResolution.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT } from '../helpers/paths.js';

const require = createRequire(import.meta.url);

interface PackageJson {
  readonly exports: Record<string, string | { import: { types: string }; require: { types: string } }>;
  readonly typesVersions?: Record<string, Record<string, string[]>>;
  readonly license: string;
  readonly repository?: unknown;
}

interface PackResult {
  readonly filename: string;
  readonly files: ReadonlyArray<{ path: string }>;
}

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
/** `sluice/http`, `sluice/express`, ...: every exported subpath that is code. */
const SUBPATHS = Object.keys(pkg.exports)
  .filter((key) => key.startsWith('./') && key !== './package.json')
  .map((key) => key.slice(2));

/** Builds dist/ when it is older than the sources, as `npm start` does. */
async function ensureBuilt(): Promise<void> {
  const { buildState } = (await import(
    new URL('../../../scripts/build-state.mjs', import.meta.url).href
  )) as {
    buildState(root?: string): { current: boolean };
  };
  if (buildState(ROOT).current) return;
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'pipe' });
}

/**
 * A consumer importing every subpath: an error if a module or its types are not found (strict, so an
 * untyped module is an error too), and an unused @ts-expect-error if they resolve to `any`.
 */
function consumerSource(): string {
  const lines = [
    "import { createLimiter, fixedWindow, MemoryStore } from 'sluice';",
    ...SUBPATHS.map((subpath, i) => `import * as subpath${i} from 'sluice/${subpath}';`),
    '',
    "export const limiter = createLimiter({ store: new MemoryStore(), policy: fixedWindow({ limit: 1, windowMs: 1000 }), name: 'api' });",
    // The expected error proves the types are real: a wrong option type must be refused.
    '// @ts-expect-error: `limit` is a number',
    "fixedWindow({ limit: 'ten', windowMs: 1000 });",
  ];
  SUBPATHS.forEach((_, i) => {
    lines.push(`export const names${i}: string[] = Object.keys(subpath${i});`);
    lines.push('// @ts-expect-error: a name no subpath exports');
    lines.push(`subpath${i}.notExportedAnywhere;`);
  });
  return `${lines.join('\n')}\n`;
}

const SETTINGS: ReadonlyArray<{
  compiler: 'typescript-5' | 'typescript';
  module: string;
  resolution: string;
}> = [
  // TypeScript 7 no longer has node10; 5.x is what projects still on it run.
  { compiler: 'typescript-5', module: 'commonjs', resolution: 'node10' },
  { compiler: 'typescript', module: 'node16', resolution: 'node16' },
  { compiler: 'typescript', module: 'nodenext', resolution: 'nodenext' },
  { compiler: 'typescript', module: 'esnext', resolution: 'bundler' },
];

describe('the packed package', () => {
  let consumer: string;
  let packed: PackResult;

  before(async () => {
    await ensureBuilt();
    // Inside the repository, so that the consumer's peers (express, @types/node...) resolve from its node_modules.
    mkdirSync(join(ROOT, 'build'), { recursive: true });
    consumer = mkdtempSync(join(ROOT, 'build', 'consumer-'));
    const output = execFileSync('npm', ['pack', '--json', '--pack-destination', consumer], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    packed = (JSON.parse(output) as PackResult[])[0] as PackResult;
    const target = join(consumer, 'node_modules', 'sluice');
    mkdirSync(target, { recursive: true });
    execFileSync('tar', ['-xzf', join(consumer, packed.filename), '-C', target, '--strip-components=1']);
    writeFileSync(join(consumer, 'consumer.ts'), consumerSource());
    writeFileSync(join(consumer, 'package.json'), '{ "type": "commonjs" }\n');
  });
  after(() => {
    if (consumer !== undefined) rmSync(consumer, { recursive: true, force: true });
  });

  test('ships the MIT license and no source maps; claims no repository it does not have', () => {
    const files = packed.files.map((file) => file.path);
    assert.ok(files.includes('LICENSE'), 'LICENSE is packed');
    assert.equal(pkg.license, 'MIT');
    assert.match(
      readFileSync(join(ROOT, 'LICENSE'), 'utf8'),
      /^MIT License\n\nCopyright \(c\) \d{4} the sluice authors\n/,
    );
    // A map names sources under src/, which the package does not ship.
    assert.deepEqual(
      files.filter((file) => file.endsWith('.map')),
      [],
    );
    assert.equal(files.filter((file) => file.startsWith('src/')).length, 0);
    assert.equal(pkg.repository, undefined);
    assert.ok(files.includes('dist/esm/cli/index.js'), 'the sluice bin is packed');
  });

  test('every subpath has a typesVersions entry naming the types its exports give', () => {
    const mapped = pkg.typesVersions?.['*'] ?? {};
    for (const subpath of SUBPATHS) {
      const target = pkg.exports[`./${subpath}`];
      assert.ok(typeof target === 'object', subpath);
      assert.deepEqual(mapped[subpath], [target.import.types], `typesVersions for sluice/${subpath}`);
    }
    assert.deepEqual(Object.keys(mapped).sort(), [...SUBPATHS].sort());
  });

  test('sluice/node exports the adapter and the key helpers, none of the writers Express and Fastify share', async () => {
    const node = await import(join(consumer, 'node_modules', 'sluice', 'dist', 'esm', 'http', 'node.js'));
    assert.deepEqual(Object.keys(node).sort(), ['clientIp', 'headerKey', 'rateLimit']);
  });

  test('npm start serves from a current build at once, without building again', async () => {
    const child = spawn('npm', ['start', '--silent', '--', '--port', '0'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: SIGTERM reaches npm, the shell and the service, as Ctrl-C would.
      detached: true,
    });
    const stop = (): void => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGTERM');
    };
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (/listening on http:\/\/127\.0\.0\.1:\d+/.test(output)) stop();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    // A generous bound, so a service that never says "listening" fails the test instead of hanging it.
    const bound = setTimeout(stop, 120_000);
    await new Promise((resolve) => child.on('close', resolve));
    clearTimeout(bound);
    assert.match(output, /^sluice serve: listening on http:\/\/127\.0\.0\.1:\d+ with the memory store\n/);
    assert.doesNotMatch(output, /building/);
  });

  for (const { compiler, module, resolution } of SETTINGS) {
    test(`a consumer type-checks every subpath with ${compiler === 'typescript' ? 'TypeScript 7' : 'TypeScript 5'}, module ${module}, moduleResolution ${resolution}`, () => {
      const config = join(consumer, `tsconfig.${compiler}.${resolution}.json`);
      writeFileSync(
        config,
        JSON.stringify({
          compilerOptions: {
            module,
            moduleResolution: resolution,
            target: 'ES2022',
            strict: true,
            noEmit: true,
            types: ['node'],
            skipLibCheck: true,
          },
          files: ['consumer.ts'],
        }),
      );
      const tsc = join(require.resolve(`${compiler}/package.json`), '..', 'bin', 'tsc');
      const result = spawnSync(process.execPath, [tsc, '-p', config], { encoding: 'utf8' });
      assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
    });
  }
});
