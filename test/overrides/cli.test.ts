// Limits and denials changed at run time across processes: `sluice limits` and `sluice deny` against two
// `sluice serve` processes and an application, all on one Redis, none restarted.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import { Redis } from 'ioredis';
import request from 'supertest';
import { rateLimit } from '../../src/http/adapters/express.js';
import { clientIp } from '../../src/http/client-key.js';
import { createLimiter, fixedWindow, RedisStore } from '../../src/index.js';
import { parseJson, runCli, type ServeProcess, startServe, writeConfig } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const HOUR = 3_600_000;

interface Answer {
  readonly status: number;
  readonly limit: number;
  readonly remaining: number;
  readonly reason: string | undefined;
}

/** One decision of a service: its status, and the limit, remaining and reason it answered. */
async function decide(service: ServeProcess, body: Record<string, unknown>): Promise<Answer> {
  const response = await fetch(`${service.base}/v1/limit`, { method: 'POST', body: JSON.stringify(body) });
  const { limit, remaining, reason } = (await response.json()) as Answer;
  return { status: response.status, limit, remaining, reason };
}

/** An answer without a reason. */
function plain(status: number, limit: number, remaining: number): Answer {
  return { status, limit, remaining, reason: undefined };
}

describe('stored limits and denials across processes', () => {
  let server: RedisServer;
  let redis: Redis;
  let config: ReturnType<typeof writeConfig>;
  let services: ServeProcess[];
  let cli: (...args: string[]) => ReturnType<typeof runCli>;

  before(async () => {
    server = await startRedis();
    redis = new Redis({ port: server.port, lazyConnect: true });
    await redis.connect();
    config = writeConfig({
      policies: {
        // A busy machine must not turn a slow reply into a timeout decision: the test asserts each one.
        api: { algorithm: 'fixedWindow', limit: 5, windowMs: HOUR, overrides: true, timeoutMs: 60_000 },
        plain: { algorithm: 'fixedWindow', limit: 5, windowMs: HOUR, timeoutMs: 60_000 },
      },
    });
    const args = ['--redis', `127.0.0.1:${server.port}`, '--config', config.path];
    services = [await startServe(args), await startServe(args)];
    cli = (...rest) => runCli([...rest, ...args]);
  });
  after(async () => {
    for (const service of services) {
      service.running.child.kill('SIGTERM');
      await service.running.exited;
    }
    redis.disconnect();
    config.remove();
    await server.stop();
  });

  test('sluice limits set raises a limit on both processes at their next decision; a request limit wins; clear restores', async () => {
    // 'acme' is counted to exact remainders in the services' hour window across four CLI runs: it must not end meanwhile.
    await clearOfWindowEnd(HOUR, 30_000);
    const [a, b] = services as [ServeProcess, ServeProcess];
    assert.deepEqual(await decide(a, { policy: 'api', key: 'acme' }), plain(200, 5, 4));
    const set = await cli('limits', 'set', 'api', 'acme', '50');
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /Stored a limit of 50 for "acme"/);
    assert.deepEqual(await decide(a, { policy: 'api', key: 'acme' }), plain(200, 50, 48));
    assert.deepEqual(await decide(b, { policy: 'api', key: 'acme' }), plain(200, 50, 47));
    assert.equal((await decide(b, { policy: 'api', key: 'other' })).limit, 5, 'one identifier only');
    // The request's own limit wins over the stored one: 3 were used, so a limit of 4 has one left.
    assert.deepEqual(await decide(b, { policy: 'api', key: 'acme', limit: 4 }), plain(200, 4, 0));
    assert.deepEqual(await decide(a, { policy: 'api', key: 'acme', limit: 4 }), plain(429, 4, 0));
    const got = parseJson<{ stored: { limit: number } }>(await cli('limits', 'get', 'api', 'acme', '--json'));
    assert.equal(got.stored.limit, 50);
    assert.equal((await cli('limits', 'clear', 'api', 'acme')).code, 0);
    // Back to the policy's 5, with the 4 units used under the other limits still counted.
    assert.deepEqual(await decide(a, { policy: 'api', key: 'acme' }), plain(200, 5, 0));
    assert.deepEqual(await decide(b, { policy: 'api', key: 'acme' }), plain(429, 5, 0));
    const unread = await cli('limits', 'set', 'plain', 'acme', '50');
    assert.match(unread.stderr, /does not set "overrides": true for plain/);
    assert.equal(
      (await decide(a, { policy: 'plain', key: 'acme' })).limit,
      5,
      'a policy without overrides reads nothing',
    );
  });

  test('sluice deny add refuses an identifier on both processes at their next decision, and the denial ends by itself', async () => {
    const [a, b] = services as [ServeProcess, ServeProcess];
    assert.equal((await decide(a, { policy: 'api', key: 'mallory' })).status, 200);
    const added = await cli('deny', 'add', 'api', 'mallory', '--for', '1s');
    assert.equal(added.code, 0, added.stderr);
    for (const service of [a, b]) {
      const refused = await decide(service, { policy: 'api', key: 'mallory' });
      assert.equal(refused.status, 403);
      assert.equal(refused.reason, 'denied');
    }
    assert.equal((await decide(b, { policy: 'api', key: 'bob' })).status, 200);
    // Redis ends it in its own time; a busy machine only makes it later for us.
    await sleep(1100);
    for (const service of [a, b])
      assert.equal((await decide(service, { policy: 'api', key: 'mallory' })).status, 200);
    assert.equal(await redis.exists('rl:api:{mallory}%deny'), 0, 'the key expired with the denial');
  });

  test('sluice deny list and remove', async () => {
    assert.equal((await cli('deny', 'add', 'api', 'eve', '--for', '1h', '--tag', 'tenant-9')).code, 0);
    const listed = parseJson<{ denials: Array<{ identifier: string; tag: string; expiresInMs: number }> }>(
      await cli('deny', 'list', 'api', '--json'),
    );
    assert.deepEqual(
      listed.denials.map(({ identifier, tag }) => ({ identifier, tag })),
      [{ identifier: 'eve', tag: 'tenant-9' }],
    );
    assert.ok((listed.denials[0]?.expiresInMs ?? 0) > 3_500_000);
    const removed = await cli('deny', 'remove', 'api', 'eve', '--tag', 'tenant-9');
    assert.match(removed.stdout, /is no longer denied/);
    assert.equal(await redis.exists('rl:api:%deny'), 0, 'an empty index is gone');
  });

  test('sluice deny add of an IPv6 /48 key refuses that network in an application keying by /48, not its neighbour', async () => {
    const store = new RedisStore({ client: redis });
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 5, windowMs: HOUR }),
      name: 'api',
      overrides: true,
    });
    const app = express();
    app.use(rateLimit({ limiter, key: clientIp({ trustProxy: ['loopback'], ipv6Prefix: 48 }) }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const from = (address: string) => request(app).get('/').set('X-Forwarded-For', address);
    assert.equal((await from('2001:db8:1:ff::1')).status, 200);
    assert.equal((await cli('deny', 'add', 'api', '2001:db8:1::/48', '--for', '1h')).code, 0);
    assert.equal((await from('2001:db8:1:ff::1')).status, 403);
    assert.equal((await from('2001:db8:1:ffff:ffff::9')).status, 403);
    const neighbour = await from('2001:db8:2::1');
    assert.equal(neighbour.status, 200);
    assert.match(String(neighbour.headers.ratelimit), /^"api";r=4;/, 'counted as usual');
    assert.equal((await cli('deny', 'remove', 'api', '2001:db8:1::/48')).code, 0);
    assert.equal((await from('2001:db8:1:ff::1')).status, 200);
  });
});
