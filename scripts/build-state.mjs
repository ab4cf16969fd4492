// Whether dist/ was built from the sources as they are now: `npm start` and the package test build only when not.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: this file lives in scripts/. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Written last by a successful build (scripts/finish-build.mjs): its time is the build's. */
export const BUILD_STAMP = join('dist', 'cjs', 'package.json');

/** What a build reads besides src/, packages/server/src/ and docs/: a change to any of them makes dist/ stale. */
const INPUT_FILES = [
  'package.json',
  'tsconfig.base.json',
  'tsconfig.esm.json',
  'tsconfig.cjs.json',
  'packages/server/package.json',
  'packages/server/tsconfig.json',
  'scripts/gen-scripts.mjs',
  'scripts/gen-protos.mjs',
  'scripts/gen-dashboard.mjs',
  'scripts/gen-exports.mjs',
  'scripts/subpaths.mjs',
  'scripts/finish-build.mjs',
  'LICENSE',
];

/** The generated file is rewritten from the .lua files, which are inputs themselves. */
const GENERATED = /\.generated\.ts$/;

function newestUnder(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestUnder(path));
    else if (!GENERATED.test(entry.name)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * `{ current: true }` when dist/ is newer than every source file and build input under `root`;
 * otherwise `{ current: false, why }`. Modification times are enough: a checkout, an edit or a
 * pull touches what it changes, and a wrong "stale" only costs a build.
 */
export function buildState(root = ROOT) {
  const stamp = join(root, BUILD_STAMP);
  if (!existsSync(stamp)) return { current: false, why: 'no build yet' };
  const builtMs = statSync(stamp).mtimeMs;
  let newest = newestUnder(join(root, 'src'));
  // The server package's sources, when the root holds them (a miniature repository in a test may not).
  const server = join(root, 'packages', 'server', 'src');
  if (existsSync(server)) newest = Math.max(newest, newestUnder(server));
  // The server package ships a copy of the docs pages.
  if (existsSync(join(root, 'docs'))) newest = Math.max(newest, newestUnder(join(root, 'docs')));
  for (const file of INPUT_FILES) {
    const path = join(root, file);
    if (existsSync(path)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest > builtMs
    ? { current: false, why: 'sources changed since the last build' }
    : { current: true };
}
