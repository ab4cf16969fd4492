// `sluice serve` as a child process: decisions over HTTP, the demo route's 429, bad requests, SIGTERM.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { parseList } from 'structured-headers';
import { DEFAULT_CONFIG } from '../../packages/server/src/cli/config.js';
import { type RunningCli, startCli, startServe, writeConfig } from '../helpers/cli.js';
import { ROOT } from '../helpers/paths.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { SERVER_FAMILY } from '../helpers/server-family.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(base: string, method: string, path: string, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${base}${path}`, { method, agent: false }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text }),
      );
    });
    request.on('error', reject);
    request.end(body);
  });
}

const limit = (base: string, body: unknown): Promise<Reply> =>
  send(base, 'POST', '/v1/limit', typeof body === 'string' ? body : JSON.stringify(body));

/** Starts `sluice serve` on a free port (from the repository root, so it reads sluice.config.json). */
const serveFromRoot = (args: readonly string[] = []) => startServe(args, { cwd: ROOT });

async function stop(running: RunningCli): Promise<number | null> {
  running.child.kill('SIGTERM');
  return (await running.exited).code;
}

describe('sluice serve', () => {
  let redisServer: RedisServer;
  let redis: Redis;

  before(async () => {
    redisServer = await startRedis();
    redis = new Redis({ port: redisServer.port, lazyConnect: true });
    await redis.connect();
  });
  after(async () => {
    redis.disconnect();
    await redisServer.stop();
  });

  test('the repository default config is the built-in default', () => {
    assert.deepEqual(
      JSON.parse(readFileSync(`${ROOT}sluice.config.json`, 'utf8')),
      JSON.parse(JSON.stringify(DEFAULT_CONFIG)),
    );
  });

  test('POST /v1/limit answers decisions and the headers to forward, the demo route 429s, SIGTERM exits 0', async () => {
    // A sliding log for the demo: no clock-aligned window may roll over between the requests.
    const config = writeConfig({
      policies: {
        api: { algorithm: 'tokenBucket', capacity: 100, refillPerSecond: 10 },
        demo: { algorithm: 'slidingLog', limit: 5, windowMs: 10_000 },
      },
      serve: { headers: ['ietf', 'draft-6'] },
    });
    const { running, base } = await serveFromRoot(['--config', config.path]);
    try {
      assert.match(
        running.output().stdout,
        /with the memory store\n {2}policies api, demo from .*sluice\.config\.json\n/,
      );
      const remaining: number[] = [];
      for (let i = 0; i < 5; i++) {
        const reply = await limit(base, { policy: 'demo', key: 'client-42' });
        assert.equal(reply.status, 200, reply.body);
        assert.equal(reply.headers['content-type'], 'application/json');
        const answer = JSON.parse(reply.body);
        assert.deepEqual(
          [answer.policy, answer.key, answer.cost, answer.allowed, answer.limit],
          ['demo', 'client-42', 1, true, 5],
        );
        remaining.push(answer.remaining);
        // The headers in the body are the ones on the response.
        assert.equal(reply.headers.ratelimit, answer.headers.RateLimit);
        assert.equal(reply.headers['ratelimit-policy'], '"demo";q=5;w=10');
        assert.equal(reply.headers['ratelimit-remaining'], String(answer.remaining));
      }
      assert.deepEqual(remaining, [4, 3, 2, 1, 0]);
      const denied = await limit(base, { policy: 'demo', key: 'client-42' });
      assert.equal(denied.status, 429);
      const answer = JSON.parse(denied.body);
      assert.equal(answer.allowed, false);
      assert.ok(answer.retryAfterMs > 0 && answer.retryAfterMs <= 10_000);
      assert.equal(denied.headers['retry-after'], String(Math.ceil(answer.retryAfterMs / 1000)));
      assert.equal(answer.headers['Retry-After'], denied.headers['retry-after']);
      assert.equal(answer.problem.status, 429);
      assert.deepEqual(answer.problem['violated-policies'], ['demo']);
      const [item] = parseList(denied.headers.ratelimit as string);
      assert.deepEqual(item?.[0], 'demo');
      assert.equal(item?.[1].get('r'), 0);
      // Another key has its own quota; a cost takes several units.
      const other = JSON.parse((await limit(base, { policy: 'api', key: 'client-7', cost: 30 })).body);
      assert.deepEqual([other.allowed, other.limit, other.remaining], [true, 100, 70]);

      // The demo route, keyed by the caller's address, with its own policy counter.
      const pages: Reply[] = [];
      for (let i = 0; i < 6; i++) pages.push(await send(base, 'GET', '/demo'));
      assert.deepEqual(
        pages.map((page) => page.status),
        [200, 200, 200, 200, 200, 429],
      );
      assert.match(pages[0]?.body as string, /^Allowed by policy "demo"/);
      assert.equal(pages[4]?.headers['ratelimit-remaining'], '0');
      const refused = pages[5] as Reply;
      assert.equal(refused.headers['content-type'], 'application/problem+json');
      assert.match(refused.headers['retry-after'] as string, /^([1-9]|10)$/);
      assert.match(refused.headers['ratelimit-policy'] as string, /^"demo";q=5;w=10$/);
      assert.equal(JSON.parse(refused.body).title, 'Too Many Requests');

      const policies = JSON.parse((await send(base, 'GET', '/v1/policies')).body);
      assert.equal(policies.demo.description, 'slidingLog(limit=5,windowMs=10000)');
      assert.equal((await send(base, 'GET', '/healthz')).body, 'ok\n');
    } finally {
      const code = await stop(running);
      assert.equal(code, 0);
      config.remove();
    }
    const { stdout, stderr } = running.output();
    assert.match(stderr, /SIGTERM: finishing requests in flight, then stopping/);
    assert.match(stdout, /sluice serve: stopped\n$/);
  });

  test('bad requests get 400 (or 404, 405, 413) problem+json, and the service keeps serving', async () => {
    // The repository's own sluice.config.json, as `npm start` serves it.
    const { running, base } = await serveFromRoot();
    try {
      assert.match(
        running.output().stdout,
        /with the memory store\n {2}policies api, search, login, uploads, demo from .*sluice\.config\.json\n/,
      );
      const cases: Array<[Promise<Reply>, number, RegExp]> = [
        [
          limit(base, '{"policy": "api",'),
          400,
          /^The body is not JSON: it starts "\{\\"policy\\": \\"api\\","; expected \{"policy": "api", "key": "client-42", "cost": 1\}\.$/,
        ],
        [limit(base, '[1, 2]'), 400, /^Expected a JSON object such as .*, got an array\.$/],
        [limit(base, ''), 400, /^The body is empty; expected /],
        [
          limit(base, { policy: 'nope', key: 'k' }),
          400,
          /^Expected "policy" to be one of "api", "search", "login", "uploads", "demo", got "nope"\.$/,
        ],
        [
          limit(base, { policy: 'api' }),
          400,
          /^Expected "key" to be a non-empty string .*, got nothing\. See sluice\/docs\/errors\.md#err_sluice_invalid_identifier$/,
        ],
        [
          limit(base, { policy: 'api', key: '' }),
          400,
          /^Expected "key" to be a non-empty string \(whose quota: .*\), got ""\. See sluice\/docs\/errors\.md#err_sluice_invalid_identifier$/,
        ],
        [
          limit(base, { policy: 'api', key: 'k', cost: 0 }),
          400,
          /^Expected "cost" to be a positive integer, got 0 \(number\)\. See sluice\/docs\/errors\.md#err_sluice_invalid_cost$/,
        ],
        [
          limit(base, { policy: 'api', key: 'k', cost: '2' }),
          400,
          /^Expected "cost" to be a positive integer, got "2"\. See sluice\/docs\/errors\.md#err_sluice_invalid_cost$/,
        ],
        [
          limit(base, { policy: 'api', key: 'k', cost: 101 }),
          400,
          /^Expected "cost" to be at most 100, the most tokenBucket\(capacity=100,refillPerSecond=10\) can ever grant, got 101 \(number\)\. See sluice\/docs\/errors\.md#err_sluice_cost_exceeds_limit$/,
        ],
        [
          limit(base, { policy: 'api', key: 'k', limit: 0 }),
          400,
          /^Expected "limit" to be a positive integer, got 0 \(number\)\. See sluice\/docs\/errors\.md#err_sluice_invalid_limit$/,
        ],
        [
          limit(base, { policy: 'api', key: 'k', costs: 1 }),
          400,
          /^Unknown field "costs"; expected "policy", "key" and optionally "cost" and "limit"\.$/,
        ],
        [limit(base, 'x'.repeat(20_000)), 413, /^The body is 20000 bytes; at most 16384 are read\.$/],
        [send(base, 'GET', '/v1/limit'), 405, /^\/v1\/limit answers POST only\.$/],
        [
          send(base, 'GET', '/nowhere'),
          404,
          /^No route "\/nowhere"; the routes are \/v1\/limit, \/v1\/release, \/v1\/extend, \/v1\/charge, \/v1\/reserve, \/v1\/settle, \/v1\/policies, \/healthz, \/demo, \/dashboard\/data, \/metrics\.$/,
        ],
      ];
      for (const [pending, status, detail] of cases) {
        const reply = await pending;
        assert.equal(reply.status, status, reply.body);
        assert.equal(reply.headers['content-type'], 'application/problem+json');
        const problem = JSON.parse(reply.body);
        assert.equal(problem.status, status);
        assert.match(problem.detail, detail);
      }
      assert.equal((await send(base, 'GET', '/v1/limit')).headers.allow, 'POST');
      // Nothing was counted for the refused requests.
      const fresh = JSON.parse((await limit(base, { policy: 'api', key: 'k' })).body);
      assert.equal(fresh.remaining, 99);
    } finally {
      assert.equal(await stop(running), 0);
    }
    assert.doesNotMatch(running.output().stderr, /at .*\.js:\d+/, 'no stack traces');
  });

  test('--redis keeps the state in Redis, under the config prefix', async () => {
    const { running, base } = await serveFromRoot(['--redis', redisServer.url]);
    try {
      // The banner names the server as its INFO does: Redis 7.0.15, Valkey 8.0.1.
      assert.match(
        running.output().stdout,
        new RegExp(`with ${SERVER_FAMILY.label} [\\d.]+ at redis://127\\.0\\.0\\.1:\\d+\\n`),
      );
      // The first decision loads the scripts, which a loaded machine may not do within the policies'
      // timeoutMs (50 ms by default): until Redis answers, on a key of its own.
      for (let i = 0; i < 100; i++) {
        if (JSON.parse((await limit(base, { policy: 'api', key: 'warm' })).body).reason === undefined) break;
      }
      const reply = await limit(base, { policy: 'login', key: 'alice', cost: 2 });
      assert.equal(reply.status, 200, reply.body);
      assert.equal(JSON.parse(reply.body).remaining, 3);
      assert.equal(await redis.zcard('rl:login:{alice}'), 2);
      const ttl = await redis.pttl('rl:login:{alice}');
      assert.ok(ttl > 0 && ttl <= 900_000);
    } finally {
      assert.equal(await stop(running), 0);
    }
  });

  test('with Redis down each policy decides by its onStoreError (api fails open, login fails closed with a 503), and the service recovers', async () => {
    const { running, base } = await serveFromRoot(['--redis', redisServer.url]);
    try {
      assert.equal((await limit(base, { policy: 'api', key: 'k-outage' })).status, 200);
      await redisServer.kill();
      const open = await limit(base, { policy: 'api', key: 'k-outage' });
      assert.equal(open.status, 200, open.body);
      assert.equal(JSON.parse(open.body).reason, 'store-error', 'the default policy fails open and says so');
      const closed = await limit(base, { policy: 'login', key: 'alice' });
      assert.equal(closed.status, 503, closed.body);
      const refused = JSON.parse(closed.body);
      assert.equal(refused.allowed, false);
      assert.equal(refused.reason, 'store-error');
      assert.equal(closed.headers['retry-after'], '1');
      await redisServer.restart();
      // The client reconnects on its own (backing off up to 2 s); poll until decisions come from Redis.
      let reason: unknown = 'store-error';
      for (let attempt = 0; attempt < 100 && reason !== undefined; attempt++) {
        const reply = await limit(base, { policy: 'api', key: 'k-outage' });
        reason = JSON.parse(reply.body).reason;
        if (reason !== undefined) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.equal(reason, undefined, 'decisions come from Redis again');
    } finally {
      assert.equal(await stop(running), 0);
    }
    const stderr = running.output().stderr;
    assert.match(stderr, /sluice serve: policy api: .*deciding by onStoreError until Redis answers/);
    assert.match(stderr, /sluice serve: policy api: Redis answers again/);
    assert.equal(
      stderr.match(/policy api: .*deciding by onStoreError/g)?.length,
      1,
      'one line per outage, not per request',
    );
  });

  test('a port in use, and a bad config, are one line and exit 2', async () => {
    const { running, base } = await serveFromRoot();
    try {
      const port = new URL(base).port;
      const clash = startCli(['serve', '--port', port], { cwd: ROOT });
      const result = await clash.exited;
      assert.equal(result.code, 2);
      assert.equal(
        result.stderr,
        `sluice serve: Port ${port} on 127.0.0.1 is already in use (--port chooses another).\n`,
      );
    } finally {
      await stop(running);
    }
    const bad = writeConfig({
      policies: { api: { algorithm: 'gcra', limit: 5, periodMs: 1000 } },
      serve: { headers: ['ietf', 'x-custom'] },
    });
    try {
      const result = await startCli(['serve', '--port', '0', '--config', bad.path]).exited;
      assert.equal(result.code, 2);
      assert.match(
        result.stderr,
        /^sluice serve: .*sluice\.config\.json: serve\.headers: expected a list of "ietf", "draft-8", "draft-7", "draft-6", "legacy", got \["ietf","x-custom"\]\.\n$/,
      );
    } finally {
      bad.remove();
    }
  });
});
