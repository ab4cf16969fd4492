// Envoy's rate limit service over gRPC on Redis, for a rule with `overrides: true`: a limit and a denial stored
// for a descriptor decide its next call; a descriptor's own limit still wins; a rule without it reads nothing.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { limiterName } from '../../packages/server/src/envoy/limiters.js';
import { createLimiter, fixedWindow, type Limiter, RedisStore } from '../../src/index.js';
import { runCli } from '../helpers/cli.js';
import {
  type Descriptor,
  envoyOnRedis,
  FIXTURES,
  HOUR_MS,
  OK,
  OVER_LIMIT,
  type RateLimitRequest,
  UNIT,
} from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

// Counts are read within one fixed window: no test starts in the last seconds of an hour's.
beforeEach(() => clearOfWindowEnd(HOUR_MS, 10_000));

const HOUR = 3_600_000;

function request(key: string, value: string, extra: Partial<Descriptor> = {}): RateLimitRequest {
  return { domain: 'stored', descriptors: [{ entries: [{ key, value }], ...extra }] };
}

describe('Envoy: limits and denials stored for descriptors', () => {
  let server: RedisServer;
  before(async () => {
    server = await startRedis();
  });
  after(async () => {
    await server.stop();
  });
  const envoy = envoyOnRedis(join(FIXTURES, 'stored.yaml'), () => server);

  /** The limiter of a rule as the service names it; its descriptors' keys are tagged with the domain. */
  function ruleLimiter(path: string): Limiter {
    const store = new RedisStore({ client: envoy.redis() });
    const name = limiterName(path, 'fixedWindow', HOUR);
    return createLimiter({ store, policy: fixedWindow({ limit: 3, windowMs: HOUR }), name, overrides: true });
  }

  test('a stored limit decides the next call; a descriptor limit wins; a denial answers OVER_LIMIT', async () => {
    const { client } = envoy.serve();
    const rule = ruleLimiter('stored.customer');
    assert.equal((await client.shouldRateLimit(request('customer', 'acme'))).statuses[0]?.limit_remaining, 2);
    await rule.setLimit('customer=acme', 10, { tag: 'stored' });
    const raised = await client.shouldRateLimit(request('customer', 'acme'));
    assert.deepEqual([raised.overall_code, raised.statuses[0]?.limit_remaining], [OK, 8]);
    const own = await client.shouldRateLimit(
      request('customer', 'acme', { limit: { requests_per_unit: 3, unit: UNIT.HOUR } }),
    );
    assert.deepEqual(
      [own.overall_code, own.statuses[0]?.limit_remaining],
      [OK, 0],
      'the descriptor’s own 3 wins',
    );
    await rule.deny('customer=acme', { tag: 'stored', forMs: 60_000 });
    const denied = await client.shouldRateLimit(request('customer', 'acme'));
    assert.deepEqual([denied.overall_code, denied.statuses[0]?.code], [OVER_LIMIT, OVER_LIMIT]);
    assert.equal((await client.shouldRateLimit(request('customer', 'other'))).overall_code, OK);
  });

  test('sluice limits reaches a rule by its limiter name, the descriptor, the domain as tag and the policy flags', async () => {
    const { client } = envoy.serve();
    const name = limiterName('stored.customer', 'fixedWindow', HOUR);
    const cli = await runCli([
      'limits',
      'set',
      name,
      'customer=beta',
      '1',
      '--tag',
      'stored',
      '--algorithm',
      'fixedWindow',
      '--limit',
      '3',
      '--window',
      '1h',
      '--redis',
      server.url,
    ]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal((await client.shouldRateLimit(request('customer', 'beta'))).overall_code, OK);
    assert.equal((await client.shouldRateLimit(request('customer', 'beta'))).overall_code, OVER_LIMIT);
  });

  test('a rule without overrides reads nothing stored', async () => {
    const { client } = envoy.serve();
    const rule = ruleLimiter('stored.plain');
    await rule.setLimit('plain=acme', 1, { tag: 'stored' });
    await rule.deny('plain=acme', { tag: 'stored' });
    for (const remaining of [2, 1, 0]) {
      const answer = await client.shouldRateLimit(request('plain', 'acme'));
      assert.deepEqual([answer.overall_code, answer.statuses[0]?.limit_remaining], [OK, remaining]);
    }
  });
});
