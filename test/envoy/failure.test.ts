// Redis killed under the Envoy service: each rule's configured answer, health NOT_SERVING, and back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { status } from '@grpc/grpc-js';
import {
  configDir,
  type EnvoyServe,
  eventually,
  httpCall,
  metric,
  OK,
  OVER_LIMIT,
  startEnvoyServe,
} from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const SERVING = 1;
const NOT_SERVING = 2;

/** A rule decided by an in-process limit of one per hour while the store fails. */
const LOCAL_RULE = `  - key: local
    rate_limit:
      unit: hour
      requests_per_unit: 1
      on_store_error: fallback
      timeout: 300ms
`;

const CONFIG = `domain: outage
descriptors:
  - key: strict
    rate_limit:
      unit: hour
      requests_per_unit: 5
      timeout: 300ms
  - key: open
    rate_limit:
      unit: hour
      requests_per_unit: 5
      on_store_error: allow
      timeout: 300ms
  - key: closed
    rate_limit:
      unit: hour
      requests_per_unit: 5
      on_store_error: deny
      timeout: 300ms
${LOCAL_RULE}`;

const call = (serve: EnvoyServe, key: string, value = 'v') =>
  serve.client.shouldRateLimit({ domain: 'outage', descriptors: [{ entries: [{ key, value }] }] }, 5000);

describe('health on the memory store', () => {
  test('SERVING once the config is loaded; an unknown service name is NOT_FOUND', async () => {
    const serve = await startEnvoyServe(configDir({ 'outage.yaml': CONFIG }));
    try {
      assert.equal(await serve.client.health(''), SERVING);
      assert.equal(await serve.client.health('ratelimit'), SERVING);
      assert.equal(await serve.client.health('envoy.service.ratelimit.v3.RateLimitService'), SERVING);
      await assert.rejects(serve.client.health('elsewhere'), { code: status.NOT_FOUND });
    } finally {
      await serve.stop();
    }
  });
});

/** `sluice serve --envoy` on a Redis of its own, for the tests of the describe block that calls it. */
function onRedis(files: Readonly<Record<string, string>>): { redis: RedisServer; serve: EnvoyServe } {
  const running = {} as { redis: RedisServer; serve: EnvoyServe };
  before(async () => {
    running.redis = await startRedis();
    running.serve = await startEnvoyServe(configDir(files), ['--redis', running.redis.url]);
  });
  after(async () => {
    await running.serve.stop();
    await running.redis.stop();
  });
  return running;
}

describe('Redis killed', () => {
  const running = onRedis({ 'outage.yaml': CONFIG });

  test('each rule answers as configured, health goes NOT_SERVING, and both come back with Redis', async () => {
    // The fallback store counts 'local' to its one per hour (on Date.now()): the hour must not end meanwhile.
    await clearOfWindowEnd(3_600_000, 30_000);
    const { redis, serve } = running;
    assert.equal(await serve.client.health(), SERVING);
    assert.equal((await call(serve, 'strict')).overall_code, OK);
    await redis.kill('SIGKILL');

    // The default: UNAVAILABLE, so that Envoy's own failure_mode_deny decides.
    await assert.rejects(call(serve, 'strict'), { code: status.UNAVAILABLE });
    assert.equal((await call(serve, 'open')).overall_code, OK);
    const closed = await call(serve, 'closed');
    assert.equal(closed.overall_code, OVER_LIMIT);
    assert.equal(closed.statuses[0]?.code, OVER_LIMIT);
    // Fallback: an in-process limit of the same rule, one per hour.
    assert.equal((await call(serve, 'local', 'l')).overall_code, OK);
    assert.equal((await call(serve, 'local', 'l')).overall_code, OVER_LIMIT);
    await eventually('NOT_SERVING', async () => (await serve.client.health()) === NOT_SERVING);
    assert.ok(
      (await metric(serve.http, 'ratelimit_service_should_rate_limit_error_total', {
        err_type: 'redis_error',
      })) >= 1,
    );
    assert.equal((await httpCall(`${serve.http}/healthcheck`)).status, 500);

    await redis.restart();
    await eventually('SERVING again', async () => (await serve.client.health()) === SERVING);
    await eventually('the store decides again', async () => {
      try {
        return (await call(serve, 'strict', 'after')).overall_code === OK;
      } catch {
        return false;
      }
    });
    const log = serve.running.output().stderr;
    assert.equal(log.match(/store failure:/g)?.length, 1, log);
    assert.match(log, /the store answers again/);
  });
});

const TWICE = `domain: twice
descriptors:
${LOCAL_RULE}`;

describe('one rule matched by two descriptors, Redis down, fallback', () => {
  const running = onRedis({ 'twice.yaml': TWICE });

  const ask = (...values: string[]) =>
    running.serve.client.shouldRateLimit(
      { domain: 'twice', descriptors: values.map((value) => ({ entries: [{ key: 'local', value }] })) },
      5000,
    );

  test("a descriptor over its fallback limit gives back the other's fallback grant", async () => {
    // The fallback store counts a and b to their one per hour (on Date.now()): the hour must not end meanwhile.
    await clearOfWindowEnd(3_600_000, 10_000);
    await running.redis.kill('SIGKILL');
    // The fallback store, one per hour: b's one unit taken alone.
    assert.equal((await ask('b')).overall_code, OK);
    const both = await ask('a', 'b');
    assert.equal(both.overall_code, OVER_LIMIT);
    assert.equal(both.statuses[1]?.code, OVER_LIMIT);
    // a was granted by the fallback store in the refused request, and given back: its unit is still there.
    assert.equal((await ask('a')).overall_code, OK, 'the refused request took nothing from a');
    assert.equal((await ask('a')).overall_code, OVER_LIMIT);
  });
});
