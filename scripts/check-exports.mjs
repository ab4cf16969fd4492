// After `npm run build`: each subpath of scripts/subpaths.mjs has its ESM, CommonJS and types files, loads with
// require() and import() with the same names, the HTTP ones serve a request, and none loads a framework or a
// metrics library.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { entryPoints, SUBPATHS, subpathFiles } from './subpaths.mjs';

const require = createRequire(import.meta.url);
const ROOT = new URL('../', import.meta.url);
// sluice/nestjs is the exception: it is made of Nest's own decorators and classes, so it loads @nestjs/common and core.
const FRAMEWORKS = ['express', 'fastify', 'hono', 'koa', 'prom-client', '@opentelemetry/api'];

const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8'));
for (const [field, expected] of Object.entries(entryPoints())) {
  assert.deepEqual(
    pkg[field],
    expected,
    `package.json's ${field} is not what scripts/subpaths.mjs lists: npm run gen`,
  );
}

async function serveOnce(core, node) {
  const store = new core.MemoryStore();
  const limiter = core.createLimiter({
    store,
    policy: core.fixedWindow({ limit: 1, windowMs: 60_000 }),
    name: 'api',
  });
  const server = createServer(node.rateLimit({ limiter }).wrap((_req, res) => res.end('ok')));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/`;
  try {
    const first = await fetch(url);
    assert.equal(first.status, 200);
    assert.match(first.headers.get('ratelimit') ?? '', /^"api";r=0;t=\d+$/);
    const second = await fetch(url);
    assert.equal(second.status, 429);
    assert.equal(second.headers.get('content-type'), 'application/problem+json');
  } finally {
    server.close();
    store.close();
  }
}

for (const [subpath, module] of Object.entries(SUBPATHS)) {
  const specifier = `sluice${subpath.slice(1)}`;
  for (const [kind, file] of Object.entries(subpathFiles(module))) {
    assert.ok(existsSync(new URL(file, ROOT)), `${specifier}: no ${kind} file (${file})`);
  }
  const required = require(specifier);
  const imported = await import(specifier);
  const names = Object.keys(required).sort();
  assert.ok(names.length > 0, `${specifier} exports nothing`);
  assert.deepEqual(
    Object.keys(imported).sort(),
    names,
    `${specifier}: the same names from import() and require()`,
  );
  const fn = names.find((name) => typeof required[name] === 'function');
  assert.ok(fn !== undefined, `${specifier} exports no function`);
  // Two builds, two copies: require() did not hand back the ESM build or the reverse.
  assert.notEqual(required[fn], imported[fn], `${specifier}: require() and import() gave the same build`);
}
const loaded = Object.keys(require.cache).filter((path) =>
  FRAMEWORKS.some((name) => path.includes(`/node_modules/${name}/`)),
);
assert.deepEqual(loaded, [], 'the subpaths import framework and metrics types only, never a library');

await serveOnce(require('sluice'), require('sluice/node'));
await serveOnce(await import('sluice'), await import('sluice/node'));
console.log(
  `check-exports: ${Object.keys(SUBPATHS).length} subpaths have ESM, CommonJS and types, load as both; node:http served from both.`,
);
