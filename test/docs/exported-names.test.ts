// One name, one meaning (docs/contributing.md, Glossary): no name is declared with `export` in two files of src/ and
// packages/server/src, but for the framework adapters' own `rateLimit` and `shed`, one per framework.
// scripts/exported-names.mjs reads them. The public names two subpaths used for two things have their own names.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import type { ProblemRefusal } from '../../src/http/index.js';
import { type MetricOutcome, OUTCOMES } from '../../src/metrics/definitions.js';
import type { MetricOutcome as PublicMetricOutcome } from '../../src/metrics/index.js';
import { ROOT } from '../helpers/paths.js';

interface ExportedNames {
  ADAPTER_NAMES: readonly string[];
  SOURCE_DIRS: readonly string[];
  declaredExports(path: string): string[];
  duplicateExports(dirs?: string | readonly string[], root?: string): Record<string, string[]>;
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
  test('no name is declared in two files of src/ and packages/server/src but the adapters’ rateLimit and shed', async () => {
    const { ADAPTER_NAMES, SOURCE_DIRS, duplicateExports } = await load();
    assert.deepEqual(
      SOURCE_DIRS.map((dir) => dir.slice(ROOT.length).replace(/^\/|\/$/g, '')),
      ['src', 'packages/server/src'],
    );
    const duplicates = duplicateExports();
    const others = Object.fromEntries(
      Object.entries(duplicates).filter(([name]) => !ADAPTER_NAMES.includes(name)),
    );
    assert.deepEqual(
      others,
      {},
      'a name declared in two files of src/ and packages/server/src: rename the internal or the server’s one (node scripts/exported-names.mjs)',
    );
    for (const name of ADAPTER_NAMES) {
      for (const file of duplicates[name] ?? [])
        assert.match(file, /^src\/http\/(?:adapters\/)?[a-z-]+\.ts$/, `${name} in ${file}`);
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

  test('a name declared once in the library and once in the server is a duplicate', async () => {
    const { duplicateExports } = await load();
    const library = miniature({ 'slot.ts': 'export class Slot {}\n', 'only.ts': 'export const ONLY = 1;\n' });
    const server = miniature({ 'envoy/slots.ts': 'export interface Slot { readonly index: number }\n' });
    // Both miniatures sit in the system's temporary folder: paths are relative to it.
    const root = join(library.dir, '..', '..');
    try {
      assert.deepEqual(duplicateExports([library.dir, server.dir], root), {
        Slot: [
          relative(root, join(library.dir, 'slot.ts')),
          relative(root, join(server.dir, 'envoy', 'slots.ts')),
        ].sort(),
      });
    } finally {
      library.remove();
      server.remove();
    }
  });

  test('sluice/metrics and sluice/http export MetricOutcome and ProblemRefusal; Outcome and Refusal there are deprecated aliases', () => {
    // These lines compile only if the public modules export the names.
    const label: PublicMetricOutcome = 'shadow_denied';
    const refusal: Pick<ProblemRefusal, 'status'> = { status: 429 };
    assert.ok(OUTCOMES.includes(label satisfies MetricOutcome));
    assert.equal(refusal.status, 429);
    for (const [file, internal, alias, meaning] of [
      ['src/metrics/index.ts', 'MetricOutcome', 'Outcome', /twin/],
      ['src/http/index.ts', 'ProblemRefusal', 'Refusal', /sluice\/shed/],
    ] as const) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      assert.match(text, new RegExp(`\\btype ${internal},`), `${file} exports ${internal}`);
      const deprecated = new RegExp(
        `@deprecated Use \\{@link ${internal}\\}([\\s\\S]*?)\\*/\\s*type ${internal} as ${alias},`,
      );
      const match = deprecated.exec(text);
      assert.ok(match, `${file}: ${alias} is a deprecated alias of ${internal}`);
      assert.match(match[1] ?? '', meaning, `${file}: the deprecation says what ${alias} names on its own`);
    }
  });
});
