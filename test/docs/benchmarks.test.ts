// BENCHMARKS.md is generated from a results file and bench/notes.md: what is committed is what they give.
// Notes edited without regenerating it left two of them out of the file for a day.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../helpers/paths.js';

const execute = promisify(execFile);

test('BENCHMARKS.md is what its results file and bench/notes.md give (npm run bench -- --report <file> --check)', async () => {
  const head = readFileSync(join(ROOT, 'BENCHMARKS.md'), 'utf8').split('\n', 1)[0] ?? '';
  const results = /from (bench\/results\/[\w.-]+\.json)/.exec(head)?.[1];
  assert.ok(results !== undefined, `BENCHMARKS.md names its results file on its first line: ${head}`);
  const run = join(ROOT, 'build', 'bench', 'run.js');
  const { stdout } = await execute(process.execPath, [run, '--report', results, '--check'], {
    cwd: ROOT,
  }).catch((error: { stdout?: string; stderr?: string }) => {
    assert.fail(`${error.stderr ?? ''}${error.stdout ?? ''}`);
  });
  assert.match(stdout, /BENCHMARKS\.md is what/);
});
