// Who may see the dashboard and /metrics of `sluice serve`: open on loopback, behind the admin token beyond it.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, test } from 'node:test';
import {
  AdminAccess,
  checkAdminToken,
  isLoopbackAddress,
} from '../../packages/server/src/dashboard/access.js';
import { type RunningCli, runCli, startServe } from '../helpers/cli.js';

const TOKEN = 'a3f9c1d27be04e8f9a6b5c4d3e2f1a0b';

interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

async function get(base: string, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  const response = await fetch(`${base}${path}`, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

async function limit(base: string): Promise<number> {
  const response = await fetch(`${base}/v1/limit`, { method: 'POST', body: '{"policy":"api","key":"k"}' });
  await response.text();
  return response.status;
}

/** Starts `sluice serve` on `host`; requests go to 127.0.0.1 (a wildcard address listens there too). */
const serveOn = (host: string, env: Record<string, string> = {}) => startServe(['--host', host], { env });

async function stop(running: RunningCli): Promise<void> {
  running.child.kill('SIGTERM');
  assert.equal((await running.exited).code, 0);
}

const ADMIN_PATHS = ['/metrics', '/dashboard/data', '/dashboard/app.js'];

describe('who may see the dashboard and /metrics', () => {
  test('loopback is 127.0.0.0/8 and ::1, also IPv4-mapped; wildcards and other addresses are beyond it', () => {
    for (const address of ['127.0.0.1', '127.0.0.2', '127.255.255.254', '::1', '::ffff:127.0.0.1']) {
      assert.equal(isLoopbackAddress(address), true, address);
    }
    for (const address of [
      '0.0.0.0',
      '::',
      '10.0.0.1',
      '192.168.1.20',
      '128.0.0.1',
      '::ffff:10.0.0.1',
      'fe80::1',
    ]) {
      assert.equal(isLoopbackAddress(address), false, address);
    }
  });

  test('the token is compared by digest: any length, Bearer or Basic password; short tokens are refused at start', () => {
    const request = (authorization?: string): IncomingMessage =>
      ({ headers: authorization === undefined ? {} : { authorization } }) as IncomingMessage;
    const access = new AdminAccess(TOKEN);
    access.listening('0.0.0.0');
    assert.deepEqual(access.check(request(`Bearer ${TOKEN}`)), { ok: true });
    const basic = Buffer.from(`anyone:${TOKEN}`).toString('base64');
    assert.deepEqual(access.check(request(`Basic ${basic}`)), { ok: true });
    for (const wrong of [
      undefined,
      'Bearer x',
      `Bearer ${TOKEN}0`,
      `Bearer ${TOKEN.slice(1)}`,
      TOKEN,
      'Basic !!',
    ]) {
      assert.equal(access.check(request(wrong)).ok, false, String(wrong));
    }
    // Configured, the token is asked for on loopback too.
    const local = new AdminAccess(TOKEN);
    local.listening('127.0.0.1');
    assert.equal(local.check(request()).ok, false);
    // Unbound, the gate stays shut.
    assert.equal(new AdminAccess(undefined).check(request()).ok, false);
    assert.throws(
      () => checkAdminToken('short', '--admin-token'),
      /Expected --admin-token to be at least 16 characters without spaces, got 5 characters; make one with: openssl rand -hex 24/,
    );
  });

  test('on loopback without a token: the page, its data and /metrics are open', async () => {
    const { running, base, banner } = await serveOn('127.0.0.1');
    try {
      assert.match(
        banner,
        /^ {2}dashboard http:\/\/127\.0\.0\.1:\d+\/ {3}metrics http:\/\/127\.0\.0\.1:\d+\/metrics$/m,
      );
      assert.equal(await limit(base), 200);
      const metrics = await get(base, '/metrics');
      assert.equal(metrics.status, 200);
      assert.equal(metrics.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
      assert.match(metrics.body, /^sluice_decisions_total\{limiter="api",outcome="allowed"\} 1$/m);
      assert.match(metrics.body, /^process_cpu_user_seconds_total /m);
      const page = await get(base, '/', { Accept: 'text/html' });
      assert.equal(page.status, 200);
      assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
      assert.equal(page.headers.get('cache-control'), 'no-store');
      assert.match(page.body, /<script src="\/dashboard\/app\.js" defer><\/script>/);
      const data = JSON.parse((await get(base, '/dashboard/data')).body);
      assert.deepEqual(
        data.policies.map((p: { name: string }) => p.name),
        ['api', 'search', 'login', 'uploads', 'demo'],
      );
      assert.equal(data.policies[0].totals.allowed, 1);
      // Scripts asking for / still get the list of routes.
      assert.match((await get(base, '/')).body, /^sluice rate-limit service\n/);
    } finally {
      await stop(running);
    }
  });

  test('beyond loopback (0.0.0.0) without a token: they are off, serve says so, decisions are served', async () => {
    const { running, base, banner } = await serveOn('0.0.0.0');
    try {
      assert.match(
        banner,
        /dashboard and \/metrics: off, since this service listens beyond loopback \(0\.0\.0\.0\) and no admin token is set; set SLUICE_ADMIN_TOKEN \(or --admin-token\) to turn them on/,
      );
      for (const path of ADMIN_PATHS) {
        const reply = await get(base, path);
        assert.equal(reply.status, 403, path);
        assert.equal(reply.headers.get('content-type'), 'application/problem+json');
        assert.match(JSON.parse(reply.body).detail, /no admin token is configured/);
      }
      assert.equal((await get(base, '/', { Accept: 'text/html' })).status, 403);
      assert.equal(await limit(base), 200);
      assert.equal((await get(base, '/healthz')).status, 200);
    } finally {
      await stop(running);
    }
  });

  test('beyond loopback with SLUICE_ADMIN_TOKEN: only requests with the token see them, decisions need none', async () => {
    const { running, base, banner } = await serveOn('0.0.0.0', { SLUICE_ADMIN_TOKEN: TOKEN });
    try {
      assert.match(banner, /metrics http:\/\/0\.0\.0\.0:\d+\/metrics {3}\(admin token required\)/);
      for (const path of ADMIN_PATHS) {
        const refused = await get(base, path);
        assert.equal(refused.status, 401, path);
        assert.match(refused.headers.get('www-authenticate') ?? '', /^Basic realm="sluice admin"/);
        assert.equal((await get(base, path, { Authorization: 'Bearer not-the-token' })).status, 401);
        assert.equal((await get(base, path, { Authorization: `Bearer ${TOKEN}` })).status, 200, path);
      }
      const basic = `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}`;
      assert.equal((await get(base, '/', { Accept: 'text/html', Authorization: basic })).status, 200);
      assert.equal(await limit(base), 200);
    } finally {
      await stop(running);
    }
  });

  test('a token too short to be safe stops serve before it listens', async () => {
    const result = await runCli(['serve', '--port', '0', '--admin-token', 'letmein']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /Expected --admin-token to be at least 16 characters/);
    assert.doesNotMatch(result.stdout, /listening/);
  });
});
