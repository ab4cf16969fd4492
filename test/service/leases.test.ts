// `sluice serve` with a concurrency policy: POST /v1/limit answers the lease, /v1/release and /v1/extend act on it.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { type ServeProcess, startServe, writeConfig } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly json: Record<string, unknown>;
}

function post(base: string, path: string, body: unknown): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const sent = httpRequest(`${base}${path}`, { method: 'POST', agent: false }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, json: JSON.parse(text) }),
      );
    });
    sent.on('error', reject);
    sent.end(typeof body === 'string' ? body : JSON.stringify(body));
  });
}

describe('sluice serve: leases of a concurrency policy', () => {
  let redis: RedisServer;
  let service: ServeProcess;
  let config: ReturnType<typeof writeConfig>;

  before(async () => {
    redis = await startRedis();
    config = writeConfig({
      policies: {
        // A busy machine must not turn a slow first call (the scripts' first load) into a fail-open answer.
        reports: { algorithm: 'concurrency', limit: 2, leaseMs: 60_000, timeoutMs: 60_000 },
        api: { algorithm: 'fixedWindow', limit: 10, windowMs: 60_000 },
      },
    });
    service = await startServe(['--config', config.path, '--redis', redis.url]);
  });
  after(async () => {
    service.running.child.kill('SIGTERM');
    await service.running.exited;
    config.remove();
    await redis.stop();
  });

  test('limit answers the lease with concurrent-requests headers; release frees it once; a third is refused with 429', async () => {
    const { base } = service;
    const first = await post(base, '/v1/limit', { policy: 'reports', key: 'k' });
    assert.equal(first.status, 200);
    const lease = first.json.lease as { id: string; token: number; expiresAt: number };
    assert.match(lease.id, /^[A-Za-z0-9_-]{16}$/);
    assert.ok(Number.isSafeInteger(lease.token) && lease.token > 0);
    assert.equal(first.headers['ratelimit-policy'], '"reports";q=2;qu="concurrent-requests"');
    assert.equal(first.headers.ratelimit, '"reports";r=1');
    const second = await post(base, '/v1/limit', { policy: 'reports', key: 'k' });
    assert.ok((second.json.lease as { token: number }).token > lease.token);
    const refused = await post(base, '/v1/limit', { policy: 'reports', key: 'k' });
    assert.equal(refused.status, 429);
    assert.equal(refused.json.lease, undefined);
    assert.match(
      (refused.json.problem as { detail: string }).detail,
      /^Too many concurrent requests for policy "reports"/,
    );

    const released = await post(base, '/v1/release', { policy: 'reports', key: 'k', lease });
    assert.equal(released.status, 200);
    assert.deepEqual([released.json.released, released.json.remaining], [true, 1]);
    const again = await post(base, '/v1/release', { policy: 'reports', key: 'k', lease });
    assert.deepEqual([again.json.released, again.json.remaining], [false, 1]);
    assert.equal((await post(base, '/v1/limit', { policy: 'reports', key: 'k' })).status, 200);
  });

  test('extend renews a live lease for at most the policy leaseMs', async () => {
    const { base } = service;
    const taken = await post(base, '/v1/limit', { policy: 'reports', key: 'x' });
    const lease = taken.json.lease as { id: string; token: number; expiresAt: number };
    const extended = await post(base, '/v1/extend', { policy: 'reports', key: 'x', lease, leaseMs: 30_000 });
    assert.equal(extended.status, 200);
    assert.equal(extended.json.extended, true);
    const renewed = extended.json.lease as { id: string; token: number; expiresAt: number };
    assert.deepEqual([renewed.id, renewed.token], [lease.id, lease.token]);
    assert.ok(renewed.expiresAt < lease.expiresAt, 'renewed for 30 s from now, sooner than the first 60 s');
    const tooLong = await post(base, '/v1/extend', { policy: 'reports', key: 'x', lease, leaseMs: 60_001 });
    assert.equal(tooLong.status, 400);
    assert.match(
      String(tooLong.json.detail),
      /Expected "leaseMs" to be a whole number of milliseconds from 1 to the policy's leaseMs \(60000\)/,
    );
    await post(base, '/v1/release', { policy: 'reports', key: 'x', lease });
    const gone = await post(base, '/v1/extend', { policy: 'reports', key: 'x', lease });
    assert.deepEqual([gone.status, gone.json.extended, gone.json.lease], [200, false, undefined]);
  });

  test('bad lease requests get 400 naming the problem, and nothing changes', async () => {
    const { base } = service;
    const cases: ReadonlyArray<readonly [string, unknown, RegExp]> = [
      [
        '/v1/release',
        { policy: 'reports', key: 'k' },
        /^Expected "lease": the lease POST \/v1\/limit answered with\./,
      ],
      [
        '/v1/release',
        { policy: 'reports', key: 'k', lease: { id: 'no/slash', token: 1 } },
        /^Expected "lease" to be the lease of an allowed acquisition/,
      ],
      [
        '/v1/release',
        { policy: 'api', key: 'k', lease: { id: 'abc', token: 1 } },
        /^Expected a policy that release\(\) applies to, got fixedWindow/,
      ],
      [
        '/v1/release',
        { policy: 'reports', key: 'k', lease: { id: 'abc', token: 1 }, leaseMs: 5 },
        /^Unknown field "leaseMs"; expected "policy", "key", "lease"\.$/,
      ],
      [
        '/v1/extend',
        { policy: 'reports', key: 'k', lease: { id: 'abc', token: 0 } },
        /^Expected "lease" to be the lease of an allowed acquisition/,
      ],
    ];
    for (const [path, body, detail] of cases) {
      const reply = await post(base, path, body);
      assert.equal(reply.status, 400, JSON.stringify(reply.json));
      assert.match(String(reply.json.detail), detail);
    }
  });
});
