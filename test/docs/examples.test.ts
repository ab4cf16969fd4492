// The examples run against a real Redis as their users would run them, importing 'sluice' by name; the
// README's and docs' TypeScript blocks and the examples compile under strict settings.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { SCRIPTS } from '../../src/stores/redis/scripts.js';
import { allCodeBlocks, type CodeBlock, onPages } from '../helpers/code-blocks.js';
import { runExample, startExample } from '../helpers/example-process.js';
import { ROOT } from '../helpers/paths.js';
import { type RedisCluster, startCluster } from '../helpers/redis-cluster.js';
import { freePort, type RedisServer, startRedis } from '../helpers/redis-server.js';
import { redisCommand } from '../helpers/resp.js';
import { buildSandbox, type Compiled, type Sandbox } from '../helpers/sandbox.js';

let sandbox: Sandbox;
let redis: RedisServer;
let blocks: CodeBlock[];
/** The examples and blocks compiled once (tsc emits even when a block has errors, so the examples still run). */
let compiled: Compiled;

before(async () => {
  redis = await startRedis();
  // The examples keep the default timeoutMs (50 ms), and their first decision would load its script
  // first: on a loaded machine that can outlast 50 ms and be answered by the failure policy (no
  // headers). Loaded here, as a long-running app's Redis holds them; FLUSHALL between examples keeps them.
  for (const script of Object.values(SCRIPTS)) {
    await redisCommand(redis.port, ['SCRIPT', 'LOAD', script.body], 10_000);
  }
  sandbox = buildSandbox();
  blocks = allCodeBlocks(ROOT);
  compiled = sandbox.compile(blocks);
});
after(async () => {
  await redis.stop();
  sandbox.remove();
});

describe('documented code', () => {
  test('every example and every TypeScript block of README.md and docs/*.md compiles with strict settings', () => {
    assert.ok(blocks.length >= 20, `found ${blocks.length} blocks`);
    assert.ok(compiled.ok, `tsc failed:\n${onPages(compiled.output, blocks).join('\n')}`);
  });

  test("the README's quick start is examples/express-redis.ts, the example run below", () => {
    const quickStart = blocks.find(
      (block) => block.page === 'README.md' && block.code.includes('sluice/express'),
    );
    const example = readFileSync(join(ROOT, 'examples', 'express-redis.ts'), 'utf8');
    assert.equal(quickStart?.code.replace(/\nexport \{\};\n$/, '\n'), example);
  });

  test('the pictures of docs/algorithms.md are what scripts/draw-algorithms.mjs draws from the package today', async () => {
    const out = mkdtempSync(join(sandbox.root, 'images-'));
    mkdirSync(join(sandbox.root, 'scripts'), { recursive: true });
    const script = join(sandbox.root, 'scripts', 'draw-algorithms.mjs');
    copyFileSync(join(ROOT, 'scripts', 'draw-algorithms.mjs'), script);
    const run = await runExample(process.execPath, [script, out], {});
    assert.equal(run.code, 0, run.stderr);
    const drawn = readdirSync(out).sort();
    assert.deepEqual(drawn, [
      'fixedWindow.svg',
      'gcra.svg',
      'slidingLog.svg',
      'slidingWindow.svg',
      'tokenBucket.svg',
    ]);
    for (const name of drawn) {
      assert.equal(
        readFileSync(join(out, name), 'utf8'),
        readFileSync(join(ROOT, 'docs', 'images', name), 'utf8'),
        `docs/images/${name} is stale: npm run build && node scripts/draw-algorithms.mjs`,
      );
    }
  });

  test('the package ships docs/, where every error message points', () => {
    const packed = execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: ROOT, encoding: 'utf8' });
    const files = (JSON.parse(packed) as Array<{ files: Array<{ path: string }> }>)[0]?.files.map(
      (f) => f.path,
    );
    assert.ok(files?.includes('docs/errors.md'), 'docs/errors.md in the tarball');
  });

  test('a documented block that stops compiling fails the check, at its page and line', () => {
    const original = blocks.find(
      (block) => block.page === 'README.md' && block.code.includes('createLimiter('),
    );
    assert.ok(original, 'a README block calling createLimiter');
    // As if the API were renamed under the documentation's feet.
    const broken = { ...original, code: original.code.replace('createLimiter(', 'createRateLimiter(') };
    const compiled = sandbox.compile([broken], 'broken');
    assert.equal(compiled.ok, false);
    const offset = original.code.split('\n').findIndex((line) => line.includes('createLimiter('));
    const reported = onPages(compiled.output, [broken]);
    assert.ok(
      reported.some(
        (line) => line.startsWith(`README.md:${original.line + offset}:`) && line.includes('TS2'),
      ),
      reported.join('\n'),
    );
  });
});

/** GETs `url` `times` times in a row; returns every response. */
async function getMany(
  url: string,
  times: number,
  headers: Record<string, string> = {},
): Promise<Response[]> {
  const responses: Response[] = [];
  for (let i = 0; i < times; i++) {
    const response = await fetch(url, { headers });
    await response.arrayBuffer();
    responses.push(response);
  }
  return responses;
}

/**
 * The first `limit` requests of a fresh identifier are allowed; a refusal follows within a few more
 * (each algorithm may refill a unit while a busy machine sends them, hence a few, not one).
 */
async function expectLimit(
  url: string,
  limit: number,
  headers: Record<string, string> = {},
): Promise<Response> {
  const allowed = await getMany(url, limit, headers);
  assert.deepEqual(
    allowed.map((response) => response.status),
    Array(limit).fill(200),
  );
  for (const response of await getMany(url, 10, headers)) {
    if (response.status === 429) {
      assert.ok(Number(response.headers.get('retry-after')) >= 1);
      assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/);
      return response;
    }
  }
  assert.fail('no 429 within 10 requests past the limit');
}

describe('examples against a real Redis', () => {
  const env = (): Record<string, string> => ({ REDIS_URL: redis.url });
  const serve = async (name: string) => {
    await redisCommand(redis.port, ['FLUSHALL']);
    return startExample(process.execPath, [sandbox.example(name)], {
      ...env(),
      PORT: String(await freePort()),
    });
  };

  test('express-redis: 5 requests a minute per address, IETF headers, then 429 with Retry-After', async () => {
    const app = await serve('express-redis');
    try {
      const [first] = await getMany(`${app.url}/`, 1);
      assert.equal(first?.headers.get('ratelimit-policy'), '"api";q=5;w=60');
      assert.match(first?.headers.get('ratelimit') ?? '', /^"api";r=4;t=\d+$/);
      await expectLimit(`${app.url}/`, 4);
    } finally {
      await app.stop();
    }
  });

  test('fastify-plugin: /api needs an x-api-key and allows a burst of 3 per key; /health is not limited', async () => {
    const app = await serve('fastify-plugin');
    try {
      assert.deepEqual(
        (await getMany(`${app.url}/health`, 6)).map((response) => response.status),
        Array(6).fill(200),
      );
      assert.equal((await getMany(`${app.url}/api/items`, 1))[0]?.status, 400);
      await expectLimit(`${app.url}/api/items`, 3, { 'x-api-key': 'k1' });
      assert.equal((await getMany(`${app.url}/api/items`, 1, { 'x-api-key': 'k2' }))[0]?.status, 200);
    } finally {
      await app.stop();
    }
  });

  test('hono-node: a bucket of 4 per address on /api/*, read from the Node socket', async () => {
    const app = await serve('hono-node');
    try {
      const refused = await expectLimit(`${app.url}/api/hello`, 4);
      assert.match(refused.headers.get('ratelimit') ?? '', /^"hono";r=0;t=\d+$/);
    } finally {
      await app.stop();
    }
  });

  test('koa: 5 a minute per address, the remaining count from ctx.state in the body', async () => {
    const app = await serve('koa');
    try {
      const response = await fetch(`${app.url}/`);
      assert.deepEqual(await response.json(), { remaining: 4 });
      assert.equal(response.headers.get('ratelimit-policy'), '"koa";q=5;w=60');
      await expectLimit(`${app.url}/`, 4);
    } finally {
      await app.stop();
    }
  });

  test('nestjs: 5 a minute on every route, 2 for /search by name, /health not limited, the decision in the handler', async () => {
    const app = await serve('nestjs');
    try {
      assert.deepEqual(
        (await getMany(`${app.url}/health`, 7)).map((response) => response.status),
        Array(7).fill(200),
      );
      const response = await fetch(`${app.url}/`);
      assert.deepEqual(await response.json(), { remaining: 4 });
      assert.match(response.headers.get('ratelimit') ?? '', /^"api";r=4;t=\d+$/);
      await expectLimit(`${app.url}/search`, 2);
      const refused = await fetch(`${app.url}/search`);
      assert.equal(refused.status, 429);
      const problem = (await refused.json()) as { 'violated-policies': string[] };
      assert.deepEqual(problem['violated-policies'], ['search']);
      await expectLimit(`${app.url}/`, 4);
    } finally {
      await app.stop();
    }
  });

  test('node-http: wrap() limits a plain listener to 3 a minute, with IETF and draft-6 headers', async () => {
    const app = await serve('node-http');
    try {
      const [first] = await getMany(`${app.url}/`, 1);
      assert.equal(first?.headers.get('ratelimit-limit'), '3');
      assert.equal(first?.headers.get('ratelimit-policy'), '"node";q=3;w=60');
      await expectLimit(`${app.url}/`, 2);
    } finally {
      await app.stop();
    }
  });

  test('fetch-handler: keyed by x-api-key, 400 without one, 3 in 10 s per key', async () => {
    const app = await serve('fetch-handler');
    try {
      assert.equal((await getMany(`${app.url}/x`, 1))[0]?.status, 400);
      const response = await fetch(`${app.url}/items`, { headers: { 'x-api-key': 'k1' } });
      assert.deepEqual(await response.json(), { path: '/items' });
      await expectLimit(`${app.url}/items`, 2, { 'x-api-key': 'k1' });
    } finally {
      await app.stop();
    }
  });

  test('login-guard: 204 for the right password, 401 with attempts left, then 429 for the username', async () => {
    const app = await serve('login-guard');
    const login = (username: string, password: string) =>
      fetch(`${app.url}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username, password }),
      });
    try {
      assert.equal((await login('alice', 'correct horse battery staple')).status, 204);
      const left: unknown[] = [];
      for (let i = 0; i < 5; i++) {
        const response = await login('alice', 'guess');
        assert.equal(response.status, 401);
        left.push(((await response.json()) as { attemptsLeft: number }).attemptsLeft);
      }
      assert.deepEqual(left, [4, 3, 2, 1, 0]);
      const blocked = await login('ALICE', 'correct horse battery staple');
      assert.equal(blocked.status, 429, 'the same username, however spelled, even with the right password');
      assert.ok(Number(blocked.headers.get('retry-after')) > 800);
      assert.equal((await login('bob', 'guess')).status, 401, 'another username keeps its own budget');
    } finally {
      await app.stop();
    }
  });

  test('all: per-user and per-tenant limits decided together; a refusal takes nothing from the other', async () => {
    await redisCommand(redis.port, ['FLUSHALL']);
    const run = await runExample(process.execPath, [sandbox.example('all')], env());
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.stdout.trim().split('\n'), [
      'u1@acme: allowed (user 1 left, tenant 2 left)',
      'u1@acme: allowed (user 0 left, tenant 1 left)',
      'u1@acme: denied by user (user 0 left, tenant 1 left)',
      'u2@acme: allowed (user 1 left, tenant 0 left)',
      'u2@acme: denied by tenant (user 1 left, tenant 0 left)',
    ]);
  });

  test('concurrency: two leases at once, a refusal that waits for the soonest expiry, release once, a greater token', async () => {
    await redisCommand(redis.port, ['FLUSHALL']);
    const run = await runExample(process.execPath, [sandbox.example('concurrency')], env());
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.stdout.trim().split('\n'), [
      'first: true, second: true (0 free)',
      'third: false, retry within 30 s',
      'released: true',
      'released again: false',
      'fourth: true, token above the first: true',
    ]);
  });

  test('throttle-workers: three processes share one pace to a rate-limited upstream; every call answered 200', async () => {
    await redisCommand(redis.port, ['FLUSHALL']);
    const run = await runExample(process.execPath, [sandbox.example('throttle-workers')], env());
    assert.equal(run.code, 0, run.stderr);
    const [pace, answered, busiest] = run.stdout.trim().split('\n');
    assert.equal(pace, '3 workers x 20 calls, paced together at 40 per second');
    assert.equal(answered, 'every call answered 200: true');
    // Printed, not asserted: a stalled machine may bunch calls (the upstream's 429 then pauses every worker).
    assert.match(busiest ?? '', /^busiest second at the upstream: \d+ requests \(it allows 50\)$/);
  });

  test('llm-proxy: streamed answers pass through; their usage is charged after them, into debt, and the user waits until it is paid', async () => {
    const app = await serve('llm-proxy');
    const ask = (user: string, maxTokens: number) =>
      fetch(`${app.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-user': user },
        body: JSON.stringify({ model: 'any', messages: [], max_tokens: maxTokens }),
      });
    const quota = async (user: string) =>
      (await (await fetch(`${app.url}/v1/quota`, { headers: { 'x-user': user } })).json()) as {
        remaining: number;
        retryAfterMs: number;
      };
    /** Polls the quota until `check` holds: the charge lands once the stream has ended (a bound, not a measure). */
    const until = async (
      user: string,
      check: (q: { remaining: number; retryAfterMs: number }) => boolean,
    ) => {
      for (let i = 0; i < 200; i++) {
        const seen = await quota(user);
        if (check(seen)) return seen;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      assert.fail(`the quota of ${user} never got there; the proxy printed:\n${app.output()}`);
    };
    try {
      const first = await ask('alice', 600);
      assert.equal(first.status, 200);
      const text = await first.text();
      assert.match(text, /"total_tokens":600/);
      assert.match(text, /data: \[DONE\]/);
      // Policies counted in tokens name no IETF unit: no rate-limit fields rather than a count of requests.
      assert.equal(first.headers.get('ratelimit'), null);
      await until('alice', (q) => q.remaining < 500);
      // About 400 left: the estimate of 100 fits; the answer uses 900, and alice owes about 500.
      const second = await ask('alice', 900);
      assert.equal(second.status, 200);
      await second.text();
      const owing = await until('alice', (q) => q.retryAfterMs > 20_000);
      assert.equal(owing.remaining, 0);
      const refused = await ask('alice', 10);
      assert.equal(refused.status, 429);
      assert.ok(Number(refused.headers.get('retry-after')) >= 20, 'refused until the debt is paid');
      assert.equal((await ask('bob', 10)).status, 200, 'another user has a quota of its own');
    } finally {
      await app.stop();
    }
  });

  test('llm-proxy: a client that hangs up stops the upstream and pays for the tokens streamed until then', async (t) => {
    // An upstream of the test's: up to 5000 token events, 10 per write, until its client goes.
    const TOKENS = 5000;
    let sent = 0;
    let closedEarly = false;
    const upstream = createServer((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const event = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'tok ' } }] })}\n\n`;
      const timer = setInterval(() => {
        if (sent >= TOKENS) {
          clearInterval(timer);
          const usage = { prompt_tokens: 10, completion_tokens: TOKENS, total_tokens: TOKENS + 10 };
          response.end(`data: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`);
          return;
        }
        sent += 10;
        response.write(event.repeat(10));
      }, 2);
      response.on('close', () => {
        clearInterval(timer);
        if (sent < TOKENS) closedEarly = true;
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    await redisCommand(redis.port, ['FLUSHALL']);
    const app = await startExample(process.execPath, [sandbox.example('llm-proxy')], {
      ...env(),
      PORT: String(await freePort()),
      UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    });
    try {
      const client = new AbortController();
      const answer = await fetch(`${app.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-user': 'carol' },
        body: JSON.stringify({ model: 'any', messages: [] }),
        signal: client.signal,
      });
      assert.equal(answer.status, 200);
      // Read 950 token events of the user's 1000, then hang up.
      let seen = 0;
      const decoder = new TextDecoder();
      for await (const chunk of answer.body ?? []) {
        seen += decoder.decode(chunk, { stream: true }).split('"delta"').length - 1;
        if (seen >= 950) break;
      }
      client.abort();
      // The proxy sees the close, charges and aborts the upstream: counted, not timed (a bound of 10 s).
      for (let i = 0; i < 400 && !closedEarly && sent < TOKENS; i++) await delay(25);
      assert.ok(closedEarly, `the upstream was stopped: it sent ${sent} of ${TOKENS} tokens`);
      const quota = (await (
        await fetch(`${app.url}/v1/quota`, { headers: { 'x-user': 'carol' } })
      ).json()) as { remaining: number };
      // At least 950 of 1000 charged (the bucket refills 1000 a minute: 400 is 24 s of refill);
      // the estimate alone (100) would leave about 900.
      t.diagnostic(
        `client read ${seen}, upstream sent ${sent} of ${TOKENS}, ${quota.remaining} of 1000 left`,
      );
      assert.ok(quota.remaining < 500, `${quota.remaining} left after ${seen} tokens streamed`);
    } finally {
      await app.stop();
      upstream.closeAllConnections();
      upstream.close();
    }
  });

  test('service-curl.sh: the service answers 200, then 429 with headers and a problem body, and 400', async () => {
    await redisCommand(redis.port, ['FLUSHALL']);
    const config = join(ROOT, 'sluice.config.json');
    const service = await startExample(
      process.execPath,
      [sandbox.cli, 'serve', '--port', '0', '--redis', redis.url, '--config', config],
      {},
    );
    try {
      const run = await runExample('bash', [join(ROOT, 'examples', 'service-curl.sh')], {
        SLUICE_URL: service.url,
      });
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /"allowed": ?true,\s*"limit": ?5,\s*"remaining": ?0/);
      assert.match(run.stdout, /^HTTP\/1\.1 429 Too Many Requests\r?$/m);
      assert.match(run.stdout, /^Retry-After: \d+\r?$/m);
      assert.match(run.stdout, /"violated-policies": ?\[\s*"login"\s*\]/);
      assert.match(run.stdout, /^400$/m);
    } finally {
      await service.stop();
    }
  });
});

describe('example against a real Redis Cluster', () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await startCluster();
  });
  after(async () => {
    await cluster.stop();
  });

  test('cluster: the same limiter on a cluster client, each identifier in its own slot', async () => {
    const nodes = cluster.rootNodes.map(({ host, port }) => `${host}:${port}`).join(',');
    const run = await runExample(process.execPath, [sandbox.example('cluster')], {
      REDIS_CLUSTER_NODES: nodes,
    });
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.trim().split('\n');
    assert.equal(lines.length, 3);
    for (const [i, user] of ['alice', 'bob', 'carol'].entries()) {
      assert.match(
        lines[i] ?? '',
        new RegExp(`^${user} \\(rl:api:\\{${user}\\}, slot \\d+\\): allowed, allowed, allowed, denied$`),
      );
    }
  });
});
