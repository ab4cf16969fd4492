// After `npm run build`: each subpath loads with require() and import(), the HTTP ones serve a request, and none
// loads a framework or a metrics library.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const SUBPATHS = {
  'sluice/http': ['rateLimitHeaders', 'refusalFor', 'problemDetails', 'clientIp', 'headerKey'],
  'sluice/express': ['rateLimit'],
  'sluice/fastify': ['rateLimit'],
  'sluice/hono': ['rateLimit'],
  'sluice/node': ['rateLimit'],
  'sluice/fetch': ['rateLimit'],
  'sluice/koa': ['rateLimit'],
  'sluice/metrics': ['prometheusMetrics', 'openTelemetryMetrics', 'decisionMetrics', 'SpaceSaving'],
};
const FRAMEWORKS = [
  'express',
  'fastify',
  'hono',
  'koa',
  '@nestjs/common',
  '@nestjs/core',
  'prom-client',
  '@opentelemetry/api',
];
// Nest's adapter is made of Nest's own decorators and classes: it loads @nestjs/common and @nestjs/core (checked last).
const NEST = { 'sluice/nestjs': ['SluiceModule', 'SluiceGuard', 'RateLimit', 'SluiceThrottlerStorage'] };

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

for (const [specifier, names] of Object.entries(SUBPATHS)) {
  const required = require(specifier);
  const imported = await import(specifier);
  for (const name of names) {
    assert.equal(typeof required[name], 'function', `require('${specifier}').${name}`);
    assert.equal(typeof imported[name], 'function', `import('${specifier}').${name}`);
  }
  // Two builds, two copies: require() did not hand back the ESM build or the reverse.
  assert.notEqual(required[names[0]], imported[names[0]]);
}
const loaded = Object.keys(require.cache).filter((path) =>
  FRAMEWORKS.some((name) => path.includes(`/node_modules/${name}/`)),
);
assert.deepEqual(loaded, [], 'the subpaths import framework and metrics types only, never a library');
for (const [specifier, names] of Object.entries(NEST)) {
  const required = require(specifier);
  const imported = await import(specifier);
  for (const name of names) {
    assert.equal(typeof required[name], 'function', `require('${specifier}').${name}`);
    assert.equal(typeof imported[name], 'function', `import('${specifier}').${name}`);
  }
}

await serveOnce(require('sluice'), require('sluice/node'));
await serveOnce(await import('sluice'), await import('sluice/node'));
console.log(
  `check-exports: ${Object.keys(SUBPATHS).length + Object.keys(NEST).length} subpaths load as CommonJS and ESM; node:http served from both.`,
);
