// The public subpaths of the `sluice` package, one line each, and the module under src/ each is built from.
// `npm run gen` writes package.json's `exports` and `typesVersions` from this list; scripts/check-exports.mjs
// and the package tests read it, so a subpath added here must ship ESM, CommonJS and types or they fail.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const SUBPATHS = {
  '.': 'index',
  './http': 'http/index',
  './express': 'http/adapters/express',
  './fastify': 'http/adapters/fastify',
  './hono': 'http/adapters/hono',
  './node': 'http/adapters/node',
  './fetch': 'http/adapters/fetch',
  './koa': 'http/adapters/koa',
  './nestjs': 'http/adapters/nestjs',
  './metrics': 'metrics/index',
  './throttle': 'throttle/index',
  // For the server package alone (sluice-server): not covered by semver, see src/internal.ts.
  './internal': 'internal',
  './shed': 'shed/index',
};

/** The four files one subpath resolves to, relative to the package root. */
export function subpathFiles(module) {
  return {
    esm: `./dist/esm/${module}.js`,
    esmTypes: `./dist/esm/${module}.d.ts`,
    cjs: `./dist/cjs/${module}.js`,
    cjsTypes: `./dist/cjs/${module}.d.ts`,
  };
}

/** package.json's entry-point fields for `subpaths`, as scripts/gen-exports.mjs writes them. */
export function entryPoints(subpaths = SUBPATHS) {
  const exports = {};
  const typesVersions = {};
  for (const [subpath, module] of Object.entries(subpaths)) {
    if (!existsSync(fileURLToPath(new URL(`../src/${module}.ts`, import.meta.url)))) {
      throw new Error(
        `scripts/subpaths.mjs: ${subpath} is built from src/${module}.ts, which does not exist.`,
      );
    }
    const files = subpathFiles(module);
    // `types` first in each condition: TypeScript takes the first condition that matches.
    exports[subpath] = {
      import: { types: files.esmTypes, default: files.esm },
      require: { types: files.cjsTypes, default: files.cjs },
    };
    // TypeScript's node10 resolution (still common in CommonJS projects) reads no `exports`.
    if (subpath !== '.') typesVersions[subpath.slice(2)] = [files.esmTypes];
  }
  exports['./package.json'] = './package.json';
  const root = subpathFiles(subpaths['.']);
  return {
    main: root.cjs,
    module: root.esm,
    types: root.esmTypes,
    exports,
    typesVersions: { '*': typesVersions },
  };
}
