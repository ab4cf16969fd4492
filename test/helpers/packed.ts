// Both packages of this repository packed as npm publishes them (`npm pack`), from a build of the current sources.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './paths.js';

export interface Tarball {
  /** The package's name: `sluice` or `sluice-server`. */
  readonly name: string;
  readonly version: string;
  /** The .tgz file. */
  readonly path: string;
  /** Bytes of the .tgz, and of its files unpacked (npm's own figures). */
  readonly size: number;
  readonly unpackedSize: number;
  /** Every file it holds, relative to the package's folder. */
  readonly files: readonly string[];
}

export interface Packed {
  readonly library: Tarball;
  readonly server: Tarball;
  /** The temporary folder holding both tarballs. */
  readonly dir: string;
  remove(): void;
}

interface PackResult {
  readonly name: string;
  readonly version: string;
  readonly filename: string;
  readonly size: number;
  readonly unpackedSize: number;
  readonly files: ReadonlyArray<{ path: string }>;
}

/**
 * Builds dist/ when it is older than the sources, as `npm start` does. `npm test` builds before it runs the
 * package suites (two of them building at once would write over each other); this covers a suite run alone.
 */
export async function ensureBuilt(): Promise<void> {
  const url = new URL('../../../scripts/build-state.mjs', import.meta.url).href;
  const { buildState } = (await import(url)) as { buildState(root?: string): { current: boolean } };
  if (buildState(ROOT).current) return;
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'pipe' });
}

/** Packs the library (the repository's root) and the server package (packages/server) into a temporary folder. */
export async function packBoth(): Promise<Packed> {
  await ensureBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-packed-'));
  const output = execFileSync(
    'npm',
    ['pack', '--json', '--workspaces', '--include-workspace-root', '--pack-destination', dir],
    { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const tarballs = (JSON.parse(output) as PackResult[]).map(
    (result): Tarball => ({
      name: result.name,
      version: result.version,
      path: join(dir, result.filename),
      size: result.size,
      unpackedSize: result.unpackedSize,
      files: result.files.map((file) => file.path),
    }),
  );
  const named = (name: string): Tarball => {
    const found = tarballs.find((tarball) => tarball.name === name);
    if (found === undefined) throw new Error(`npm pack made no ${name} tarball: ${output}`);
    return found;
  };
  return {
    library: named('sluice'),
    server: named('sluice-server'),
    dir,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
