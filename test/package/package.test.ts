// The packed tarballs: what each ships, and that a consumer finds every subpath's types under each moduleResolution.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Packed, packBoth } from '../helpers/packed.js';
import { ROOT } from '../helpers/paths.js';

const require = createRequire(import.meta.url);

interface PackageJson {
  readonly exports: Record<string, string | { import: { types: string }; require: { types: string } }>;
  readonly typesVersions?: Record<string, Record<string, string[]>>;
  readonly license: string;
  readonly version: string;
  readonly repository?: unknown;
  readonly bin?: Record<string, string>;
  readonly dependencies?: Record<string, string>;
}

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
const serverPkg = JSON.parse(
  readFileSync(join(ROOT, 'packages', 'server', 'package.json'), 'utf8'),
) as PackageJson;
/** `sluice/http`, `sluice/express`, ...: every exported subpath that is code. */
const SUBPATHS = Object.keys(pkg.exports)
  .filter((key) => key.startsWith('./') && key !== './package.json')
  .map((key) => key.slice(2));

/** What each package may ship: code and its types, the docs pages, the license. No maps, images, sources, tests. */
const SHIPPED = {
  library:
    /^(package\.json|README\.md|LICENSE|docs\/[a-z-]+\.md|dist\/cjs\/package\.json|dist\/(esm|cjs)\/[\w/.-]+\.(js|d\.ts))$/,
  server:
    /^(package\.json|README\.md|LICENSE|bin\/sluice\.js|docs\/[a-z-]+\.md|dist\/[\w/.-]+\.js|dist\/proto\/[\w/.-]+\.proto)$/,
};

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

describe('the packed packages', () => {
  let consumer: string;
  let packed: Packed;

  before(async () => {
    packed = await packBoth();
    // Inside the repository, so that the consumer's peers (express, @types/node...) resolve from its node_modules.
    mkdirSync(join(ROOT, 'build'), { recursive: true });
    consumer = mkdtempSync(join(ROOT, 'build', 'consumer-'));
    const target = join(consumer, 'node_modules', 'sluice');
    mkdirSync(target, { recursive: true });
    execFileSync('tar', ['-xzf', packed.library.path, '-C', target, '--strip-components=1']);
    writeFileSync(join(consumer, 'consumer.ts'), consumerSource());
    writeFileSync(join(consumer, 'package.json'), '{ "type": "commonjs" }\n');
  });
  after(() => {
    if (consumer !== undefined) rmSync(consumer, { recursive: true, force: true });
    packed?.remove();
  });

  test('each ships its code, the docs pages and the MIT license: no maps, images, sources or tests', () => {
    assert.equal(pkg.license, 'MIT');
    assert.equal(serverPkg.license, 'MIT');
    assert.match(
      readFileSync(join(ROOT, 'LICENSE'), 'utf8'),
      /^MIT License\n\nCopyright \(c\) \d{4} the sluice authors\n/,
    );
    for (const [kind, tarball] of [
      ['library', packed.library],
      ['server', packed.server],
    ] as const) {
      const unexpected = tarball.files.filter((file) => !SHIPPED[kind].test(file));
      assert.deepEqual(unexpected, [], `${tarball.name} ships only what its users need`);
      for (const file of ['LICENSE', 'README.md', 'docs/errors.md']) {
        assert.ok(tarball.files.includes(file), `${tarball.name} ships ${file}`);
      }
    }
    // The library carries neither the service nor the command; the server package carries both.
    assert.deepEqual(
      packed.library.files.filter((file) => /^dist\/(esm|cjs)\/(cli|envoy)\//.test(file)),
      [],
    );
    assert.equal(pkg.bin, undefined);
    assert.deepEqual(serverPkg.bin, { sluice: './bin/sluice.js', 'sluice-server': './bin/sluice.js' });
    assert.ok(packed.server.files.includes('dist/cli/index.js'));
    assert.ok(packed.server.files.some((file) => file.startsWith('dist/proto/') && file.endsWith('.proto')));
    // Released together: the server depends on the library of its own version, exactly (it imports sluice/internal,
    // which semver does not cover), and ships none of the library's modules.
    assert.equal(serverPkg.version, pkg.version);
    assert.equal(serverPkg.dependencies?.sluice, pkg.version);
    const libraryModules = new Set(
      packed.library.files.flatMap((file) => /^dist\/esm\/(.+)\.js$/.exec(file)?.slice(1) ?? []),
    );
    assert.deepEqual(
      packed.server.files.filter((file) => libraryModules.has(/^dist\/(.+)\.js$/.exec(file)?.[1] ?? '')),
      [],
    );
    // Both name the repository (npm shows the README's images from it), the same one.
    assert.deepEqual(serverPkg.repository, { ...(pkg.repository as object), directory: 'packages/server' });
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

  test('sluice/node exports the adapter, shed, the key helpers and bodyBytes (for settle), none of the writers Express and Fastify share', async () => {
    const node = await import(
      join(consumer, 'node_modules', 'sluice', 'dist', 'esm', 'http', 'adapters', 'node.js')
    );
    assert.deepEqual(Object.keys(node).sort(), [
      'bodyBytes',
      'clientIp',
      'headerKey',
      'rateLimit',
      'shed',
      'shedRefusal',
    ]);
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
