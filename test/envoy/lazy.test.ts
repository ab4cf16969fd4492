// gRPC, protobuf and YAML are loaded only by `serve --envoy`: importing sluice, or the CLI, never loads them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const LIBRARY = fileURLToPath(new URL('../../src/index.js', import.meta.url));
const SERVE = fileURLToPath(new URL('../../packages/server/src/cli/serve.js', import.meta.url));
const ENVOY = fileURLToPath(new URL('../../packages/server/src/envoy/index.js', import.meta.url));

/**
 * Imports `files` in a fresh process whose resolve hook lists every bare package asked for. The hook
 * appends to a file rather than printing: module hooks run on a thread of their own, whose output a
 * process that exits at once may not flush (Node 26 lost it).
 */
function packagesLoadedBy(files: readonly string[]): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-lazy-'));
  const log = join(dir, 'packages.txt');
  writeFileSync(log, '');
  const hooks = `import { appendFileSync } from 'node:fs';
  export async function resolve(specifier, context, next) {
    if (!specifier.startsWith('.') && !specifier.startsWith('node:') && !specifier.startsWith('file:') && !specifier.startsWith('/')) appendFileSync(${JSON.stringify(log)}, specifier + '\\n');
    return next(specifier, context);
  }`;
  const script = `import { register } from 'node:module';
    register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)}));
    for (const file of ${JSON.stringify(files)}) await import(file);`;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(result.status, 0, result.stderr);
  const loaded = readFileSync(log, 'utf8')
    .split('\n')
    .filter((line) => line !== '');
  rmSync(dir, { recursive: true, force: true });
  return loaded;
}

const ENVOY_PACKAGES = /^(@grpc\/|protobufjs|yaml$|prom-client)/;

test('importing sluice and the serve command loads no gRPC, protobuf, YAML or prom-client', () => {
  const loaded = packagesLoadedBy([LIBRARY, SERVE]);
  assert.deepEqual(
    loaded.filter((name) => ENVOY_PACKAGES.test(name)),
    [],
  );
});

test('the Envoy module does load them (the check above can see them)', () => {
  const loaded = packagesLoadedBy([ENVOY]);
  assert.ok(loaded.includes('@grpc/proto-loader'), loaded.join(', '));
  assert.ok(loaded.includes('yaml'), loaded.join(', '));
});
