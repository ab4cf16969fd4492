// `sluice serve`'s routes for usage known after the response: POST /v1/charge, /v1/reserve and /v1/settle, on Redis.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { SCRIPTS } from '../../src/stores/redis/scripts.js';
import { type ServeProcess, startServe, writeConfig } from '../helpers/cli.js';
import { httpCall } from '../helpers/envoy/support.js';
import { ROOT } from '../helpers/paths.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

type Answer = Record<string, unknown> & { headers?: Record<string, string> };

describe('sluice serve: charge, reserve and settle', () => {
  let redis: RedisServer;
  let serve: ServeProcess;
  let config: ReturnType<typeof writeConfig>;
  before(async () => {
    redis = await startRedis();
    // An hour's window: no window rolls over while the test counts.
    config = writeConfig({
      policies: {
        tokens: { algorithm: 'fixedWindow', limit: 1000, windowMs: 3_600_000, unit: 'tokens' },
        bytes: { algorithm: 'fixedWindow', limit: 1000, windowMs: 3_600_000, unit: 'content-bytes' },
      },
      serve: { headers: ['ietf'] },
    });
    serve = await startServe(['--config', config.path, '--redis', redis.url], { cwd: ROOT });
  });
  after(async () => {
    serve.running.child.kill('SIGTERM');
    await serve.running.exited;
    config.remove();
    await redis.stop();
  });

  const post = async (path: string, body: unknown): Promise<{ status: number; answer: Answer }> => {
    const reply = await httpCall(`${serve.base}${path}`, 'POST', JSON.stringify(body));
    return { status: reply.status, answer: JSON.parse(reply.body) as Answer };
  };

  test('the scripts are loaded before serve listens: its first request loads nothing within its timeout', async () => {
    const admin = new Redis({ port: redis.port });
    try {
      const shas = Object.values(SCRIPTS).map((script) => script.sha);
      assert.deepEqual(
        await admin.call('SCRIPT', 'EXISTS', ...shas),
        shas.map(() => 1),
      );
    } finally {
      admin.disconnect();
    }
  });

  test('a reservation sent back with a lower actual gives back, with a higher one charges into debt', async () => {
    // The remainders and the debt are counted in the service's hour window: it must not end meanwhile.
    await clearOfWindowEnd(3_600_000, 10_000);
    const reserved = await post('/v1/reserve', { policy: 'tokens', key: 'u1', cost: 100 });
    assert.equal(reserved.status, 200);
    assert.equal(reserved.answer.remaining, 900, serve.running.output().stderr);
    const { id, ...reservation } = reserved.answer.reservation as { id: string };
    assert.deepEqual(reservation, { policy: 'tokens', key: 'u1', reserved: 100 });
    assert.match(id, /^[1-9][0-9]{0,14}$/, 'the id the store knows the settle by');
    // Tokens are no unit the IETF fields can name: none is written rather than a count of requests.
    assert.deepEqual(reserved.answer.headers, {});
    const lower = await post('/v1/settle', { ...(reserved.answer.reservation as object), actual: 40 });
    assert.deepEqual([lower.status, lower.answer.difference, lower.answer.remaining], [200, -60, 960]);
    // Sent again (a reply lost, another instance): applied once.
    const again = await post('/v1/settle', { ...(reserved.answer.reservation as object), actual: 40 });
    assert.deepEqual([again.status, again.answer.difference, again.answer.remaining], [200, -60, 960]);
    await post('/v1/reserve', { policy: 'tokens', key: 'u1', cost: 100 });
    const higher = await post('/v1/settle', { policy: 'tokens', key: 'u1', reserved: 100, actual: 1200 });
    assert.deepEqual(
      [higher.answer.difference, higher.answer.remaining, higher.answer.debt, higher.answer.cutOff],
      [1100, 0, 240, 0],
    );
    // In debt: refused, and a refused reservation has nothing to settle.
    const refused = await post('/v1/reserve', { policy: 'tokens', key: 'u1', cost: 1 });
    assert.equal(refused.status, 429);
    assert.equal(refused.answer.reservation, undefined);
    const equal = await post('/v1/settle', { policy: 'tokens', key: 'u1', reserved: 5, actual: 5 });
    assert.deepEqual(equal.answer, { policy: 'tokens', key: 'u1', reserved: 5, actual: 5, difference: 0 });
  });

  test('POST /v1/charge takes the amount past the limit, up to one allowance owed, and says what it cut off', async () => {
    // The charge and the refused call after it must fall in one of the service's hour windows.
    await clearOfWindowEnd(3_600_000, 10_000);
    const charged = await post('/v1/charge', { policy: 'tokens', key: 'u2', amount: 5000 });
    assert.equal(charged.status, 200);
    assert.deepEqual(
      [charged.answer.allowed, charged.answer.remaining, charged.answer.debt, charged.answer.cutOff],
      [true, 0, 1000, 3000],
    );
    const limit = await httpCall(
      `${serve.base}/v1/limit`,
      'POST',
      JSON.stringify({ policy: 'tokens', key: 'u2' }),
    );
    assert.equal(limit.status, 429);
  });

  test('a policy of bytes names its unit in RateLimit-Policy', async () => {
    const decided = await post('/v1/limit', { policy: 'bytes', key: 'u3', cost: 10 });
    assert.equal(decided.answer.headers?.['RateLimit-Policy'], '"bytes";q=1000;qu="content-bytes";w=3600');
  });

  test('bad bodies are refused with 400, naming the field', async () => {
    const cases: ReadonlyArray<[string, unknown, RegExp]> = [
      [
        '/v1/charge',
        { policy: 'tokens', key: 'k' },
        /Expected "amount" to be a positive integer, got undefined/,
      ],
      ['/v1/charge', { policy: 'tokens', key: 'k', amount: 0 }, /"amount"/],
      [
        '/v1/settle',
        { policy: 'tokens', key: 'k', reserved: 3, actual: -1 },
        /"actual" to be a whole number of at least 0/,
      ],
      ['/v1/settle', { policy: 'tokens', key: 'k', reserved: 3 }, /"actual"/],
      ['/v1/reserve', { policy: 'tokens', key: 'k', estimate: 3 }, /Unknown field "estimate"/],
      [
        '/v1/charge',
        { policy: 'nope', key: 'k', amount: 3 },
        /Expected "policy" to be one of "tokens", "bytes"/,
      ],
    ];
    for (const [path, body, message] of cases) {
      const reply = await httpCall(`${serve.base}${path}`, 'POST', JSON.stringify(body));
      assert.equal(reply.status, 400, `${path} ${JSON.stringify(body)}: ${reply.body}`);
      assert.match((JSON.parse(reply.body) as { detail: string }).detail, message);
    }
  });

  test('the index lists the routes', async () => {
    const index = (await httpCall(`${serve.base}/`)).body;
    for (const path of ['/v1/charge', '/v1/reserve', '/v1/settle'])
      assert.match(index, new RegExp(`POST ${path}`));
  });
});
