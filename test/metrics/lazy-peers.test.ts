// prom-client and @opentelemetry/api are optional: importing sluice or sluice/metrics loads neither.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';

const built = (path: string): string => new URL(`../../src/${path}`, import.meta.url).href;

test('importing sluice and sluice/metrics, and counting decisions in process, loads no metrics library', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-peers-'));
  try {
    const log = join(dir, 'resolved.log');
    writeFileSync(log, '');
    // A resolve hook sees every module specifier the process asks for, ESM or CommonJS behind import.
    writeFileSync(
      join(dir, 'hooks.mjs'),
      `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  if (/^(prom-client|@opentelemetry\\/)/.test(specifier)) appendFileSync(${JSON.stringify(log)}, specifier + '\\n');
  return next(specifier, context);
}`,
    );
    writeFileSync(
      join(dir, 'main.mjs'),
      `import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
register(${JSON.stringify(pathToFileURL(join(dir, 'hooks.mjs')).href)});
const sluice = await import(${JSON.stringify(built('index.js'))});
const { decisionMetrics, prometheusMetrics } = await import(${JSON.stringify(built('metrics/index.js'))});
const store = new sluice.MemoryStore();
const metrics = decisionMetrics();
// A clock of its own: no minute may end between the two calls, or the second would not be denied.
const limiter = sluice.createLimiter({ store, policy: sluice.fixedWindow({ limit: 1, windowMs: 60000 }), name: 'api', metrics, clock: () => 1_700_000_000_000 });
await limiter.limit('a');
await limiter.limit('a');
if (metrics.topDenied('api')[0]?.identifier !== 'a') throw new Error('not counted');
// Given a registry, prometheusMetrics has no need to load prom-client either.
prometheusMetrics({ registry: { registerMetric() {} } });
store.close();
appendFileSync(${JSON.stringify(log)}, '--- control\\n');
// Without a registry it loads prom-client, on first use.
await prometheusMetrics().ready;
`,
    );
    execFileSync(process.execPath, [join(dir, 'main.mjs')], { stdio: 'pipe' });
    const [before, control] = readFileSync(log, 'utf8').split('--- control\n');
    assert.equal(before, '', 'nothing resolved a metrics library before the control');
    assert.equal(
      control,
      'prom-client\n',
      'prometheusMetrics() without a registry loads prom-client, and the hook sees it',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
