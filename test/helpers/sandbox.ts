// The package as npm would install it (package.json and dist/esm built from this checkout, and the server package's
// build) in a folder of its own, where the examples and the documented code are compiled with strict settings and
// run, importing 'sluice' by name.
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { CodeBlock } from './code-blocks.js';
import { ROOT } from './paths.js';

const TSC = join(ROOT, 'node_modules', '.bin', 'tsc');

export interface Compiled {
  readonly ok: boolean;
  /** tsc's diagnostics, one per line, paths relative to the sandbox. */
  readonly output: string;
}

export interface Sandbox {
  readonly root: string;
  /**
   * Compiles the given blocks (as <folder>/<file>) into out/, with the examples (examples/*.ts)
   * when the folder is the default one.
   */
  compile(blocks: readonly CodeBlock[], folder?: string): Compiled;
  /** The compiled example, e.g. `out/examples/express-redis.js`. */
  example(name: string): string;
  /** The `sluice` CLI of the sandboxed server package. */
  readonly cli: string;
  remove(): void;
}

function tsc(args: readonly string[], cwd: string): Compiled {
  const result = spawnSync(TSC, ['--pretty', 'false', ...args], { cwd, encoding: 'utf8' });
  return { ok: result.status === 0, output: `${result.stdout}${result.stderr}`.trim() };
}

/**
 * Builds the sandbox: its own copy of package.json, whose `exports` then resolve 'sluice',
 * 'sluice/express'... to its own dist/esm, for the compiler and for node alike (a package may
 * import itself by name). Inside the repository, so that the peers (express, ioredis, @types/node)
 * resolve from its node_modules, as they would from an application's.
 */
export function buildSandbox(): Sandbox {
  mkdirSync(join(ROOT, 'build'), { recursive: true });
  const root = mkdtempSync(join(ROOT, 'build', 'sandbox-'));
  copyFileSync(join(ROOT, 'package.json'), join(root, 'package.json'));
  const built = tsc(['-p', join(ROOT, 'tsconfig.esm.json'), '--outDir', join(root, 'dist', 'esm')], ROOT);
  if (!built.ok) throw new Error(`Building the package failed:\n${built.output}`);
  // The service and the CLI as the server package builds them (packages/server/tsconfig.json), on the sandbox's
  // library: its types through `paths` here (the repository's own dist/ may be stale), and at run time through the
  // sandbox's package.json, the nearest one to server/ (a package imports itself by name).
  const server = join(root, 'server');
  const { exports } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { import: { types: string } }>;
  };
  const paths = Object.fromEntries(
    Object.entries(exports).flatMap(([subpath, target]) =>
      typeof target === 'string' ? [] : [[`sluice${subpath.slice(1)}`, [target.import.types]]],
    ),
  );
  writeFileSync(
    join(root, 'tsconfig.server.json'),
    JSON.stringify({
      extends: join(ROOT, 'packages', 'server', 'tsconfig.json'),
      compilerOptions: { outDir: server, paths },
    }),
  );
  const serverBuilt = tsc(['-p', join(root, 'tsconfig.server.json')], ROOT);
  if (!serverBuilt.ok) throw new Error(`Building the server package failed:\n${serverBuilt.output}`);
  mkdirSync(join(root, 'examples'));
  for (const name of readdirSync(join(ROOT, 'examples'))) {
    if (name.endsWith('.ts')) copyFileSync(join(ROOT, 'examples', name), join(root, 'examples', name));
  }
  return {
    root,
    cli: join(server, 'cli', 'index.js'),
    compile(blocks, folder = 'blocks') {
      mkdirSync(join(root, folder), { recursive: true });
      for (const block of blocks) writeFileSync(join(root, folder, block.file), block.code);
      const config = {
        extends: join(ROOT, 'tsconfig.base.json'),
        compilerOptions: {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          rootDir: '.',
          outDir: 'out',
          // The NestJS example and docs: decorators as Nest needs them, as every Nest project sets them.
          experimentalDecorators: true,
          emitDecoratorMetadata: true,
        },
        include: [...(folder === 'blocks' ? ['examples/*.ts'] : []), `${folder}/*.ts`],
      };
      const file = `tsconfig.${folder}.json`;
      writeFileSync(join(root, file), JSON.stringify(config, null, 2));
      return tsc(['-p', file], root);
    },
    example: (name) => join(root, 'out', 'examples', `${name}.js`),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}
