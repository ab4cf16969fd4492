// When `npm start` rebuilds: only when a source or build input is newer than the last build.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';

type BuildState = (root: string) => { current: boolean; why?: string };

async function loadBuildState(): Promise<BuildState> {
  const url = new URL('../../../scripts/build-state.mjs', import.meta.url).href;
  return ((await import(url)) as { buildState: BuildState }).buildState;
}

/** A repository in miniature, every file dated `seconds` after the epoch. */
function miniature(files: readonly string[]): { root: string; touch(file: string, seconds: number): void } {
  const root = mkdtempSync(join(tmpdir(), 'sluice-build-state-'));
  const touch = (file: string, seconds: number): void => {
    const path = join(root, file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, '');
    utimesSync(path, seconds, seconds);
  };
  for (const file of files) touch(file, 1000);
  return { root, touch };
}

describe('build state', () => {
  test('stale without a build, current after one, stale again when a source or build input changes', async () => {
    const buildState = await loadBuildState();
    const { root, touch } = miniature([
      'package.json',
      'tsconfig.esm.json',
      'src/index.ts',
      'src/algorithms/gcra.lua',
      'src/stores/redis/lua.generated.ts',
    ]);
    try {
      assert.deepEqual(buildState(root), { current: false, why: 'no build yet' });
      touch('dist/cjs/package.json', 2000);
      assert.deepEqual(buildState(root), { current: true });
      // Regenerated from the .lua files (npm test and typecheck do it): not a change by itself.
      touch('src/stores/redis/lua.generated.ts', 3000);
      assert.deepEqual(buildState(root), { current: true });
      for (const input of ['src/algorithms/gcra.lua', 'src/index.ts', 'tsconfig.esm.json', 'package.json']) {
        touch(input, 3000);
        assert.equal(buildState(root).current, false, `${input} changed`);
        touch(input, 1000);
        assert.equal(buildState(root).current, true);
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
