// One name, one meaning (docs/contributing.md, Glossary): no name is declared with `export` in two files of src/,
// but for the framework adapters' own `rateLimit` and `shed`, one per framework. scripts/exported-names.mjs reads them.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';

interface ExportedNames {
  ADAPTER_NAMES: readonly string[];
  declaredExports(path: string): string[];
  duplicateExports(dir?: string): Record<string, string[]>;
}

async function load(): Promise<ExportedNames> {
  const url = new URL('../../../scripts/exported-names.mjs', import.meta.url).href;
  return (await import(url)) as ExportedNames;
}

/** A src/ folder in miniature: file name -> source. */
function miniature(files: Record<string, string>): { dir: string; remove(): void } {
  const root = mkdtempSync(join(tmpdir(), 'sluice-exported-names-'));
  const dir = join(root, 'src');
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return { dir, remove: () => rmSync(root, { recursive: true, force: true }) };
}

describe('exported names', () => {
  test('no name is declared in two files of src/ but the adapters’ rateLimit and shed', async () => {
    const { ADAPTER_NAMES, duplicateExports } = await load();
    const duplicates = duplicateExports();
    const others = Object.fromEntries(
      Object.entries(duplicates).filter(([name]) => !ADAPTER_NAMES.includes(name)),
    );
    assert.deepEqual(
      others,
      {},
      'a name declared in two files of src/: rename the internal one (node scripts/exported-names.mjs)',
    );
    for (const name of ADAPTER_NAMES) {
      for (const file of duplicates[name] ?? [])
        assert.match(file, /^src\/http\/[a-z-]+\.ts$/, `${name} in ${file}`);
    }
  });

  test('declarations count, re-exports do not; comments, strings and regular expressions are not read as code', async () => {
    const { declaredExports, duplicateExports } = await load();
    const src = miniature({
      'a.ts': [
        'export interface Outcome { readonly allowed: boolean }',
        'export async function giveBack(): Promise<void> {}',
        'const local = 1;',
        'export { local as renamed };',
        "export const pattern = /[`'{]/;",
        '// export const commented = 1;',
        'const text = `',
        ['export const inTemplate = $', '{local}`;'].join(''),
        'export function body() {',
        '  const inner = { a: 1 };',
        '  return inner;',
        '}',
      ].join('\n'),
      'b.ts':
        "export type Outcome = 'allowed' | 'denied';\nexport { giveBack } from './a.js';\nexport type * from './a.js';\n",
      'c/d.ts': "export { renamed as Renamed } from '../a.js';\nexport class Waiter {}\n",
      'c/e.ts': 'export abstract class Waiter {}\n',
    });
    try {
      assert.deepEqual(declaredExports(join(src.dir, 'a.ts')).sort(), [
        'Outcome',
        'body',
        'giveBack',
        'pattern',
        'renamed',
      ]);
      assert.deepEqual(duplicateExports(src.dir), {
        Outcome: ['src/a.ts', 'src/b.ts'],
        Waiter: ['src/c/d.ts', 'src/c/e.ts'],
      });
    } finally {
      src.remove();
    }
  });
});
