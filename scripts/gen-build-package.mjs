// Writes build/package.json, so that in the test build (tsconfig.json, compiled into build/) the server's imports of
// `sluice`, `sluice/http`, ... resolve to build/src: the same copy of the library the tests import by relative path.
//
// Why: the server (packages/server/src) imports the library by name, as the published package does. Resolved the
// usual way (node_modules/sluice, the repository's root), that name would load dist/, a second copy of every class
// beside build/src: a SluiceError thrown by one would fail `instanceof` against the other's, and a test would run
// against the last `npm run build` instead of the sources. So both halves of the test build agree on one copy:
// tsconfig.json's `paths` map each subpath to its module under src/ for the types, and this file makes Node map it to
// the same module's output at run time (a package resolves its own name through its `exports`; build/ is that
// package for every file under it). Both lists come from scripts/subpaths.mjs; a `paths` entry that disagrees
// fails here, before any test runs.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { SUBPATHS } from './subpaths.mjs';

const root = new URL('../', import.meta.url);

const paths = JSON.parse(readFileSync(new URL('tsconfig.json', root), 'utf8')).compilerOptions.paths ?? {};
const expected = Object.fromEntries(
  Object.entries(SUBPATHS).map(([subpath, module]) => [`sluice${subpath.slice(1)}`, [`./src/${module}.ts`]]),
);
if (JSON.stringify(Object.entries(paths).sort()) !== JSON.stringify(Object.entries(expected).sort())) {
  throw new Error(
    `tsconfig.json's compilerOptions.paths must map each subpath of scripts/subpaths.mjs to its module:\n${JSON.stringify(expected, null, 2)}`,
  );
}

const exports = Object.fromEntries(
  Object.entries(SUBPATHS).map(([subpath, module]) => [subpath, `./src/${module}.js`]),
);
// The version too: `sluice --version` in the tests reads it from here, the package.json nearest the built CLI.
const { version } = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
const text = `${JSON.stringify({ name: 'sluice', version, private: true, type: 'module', exports }, null, 2)}\n`;
const target = new URL('build/package.json', root);
let previous = '';
try {
  previous = readFileSync(target, 'utf8');
} catch {}
if (previous !== text) {
  mkdirSync(new URL('build/', root), { recursive: true });
  writeFileSync(target, text);
}
