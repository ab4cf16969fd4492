// Quota mode and descriptor metadata through gRPC and POST /json, on the memory store and on Redis: the reference's
// rule for the request, sluice's for what is taken (nothing from a refused request, one group for a passing one).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import {
  type Descriptor,
  type EnvoyServe,
  envoyOnRedis,
  FIXTURES,
  HOUR_MS,
  httpCall,
  OK,
  OVER_LIMIT,
  type RateLimitResponse,
  scriptCalls,
  startEnvoyServe,
  structToJson,
} from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

// Counts are read within one fixed window: no test starts in the last seconds of an hour's.
beforeEach(() => clearOfWindowEnd(HOUR_MS, 10_000));

const CONFIG = join(FIXTURES, 'quota.yaml');

/** A descriptor of one tenant: `(tenant, <tenant>), (<key>, <value>)`. */
function of(tenant: string, key: string, value: string, hits?: number): Descriptor {
  return {
    entries: [
      { key: 'tenant', value: tenant },
      { key, value },
    ],
    ...(hits === undefined ? {} : { hits_addend: { value: hits } }),
  };
}

function codes(response: RateLimitResponse): number[] {
  return response.statuses.map((status) => status.code);
}

function metadataOf(response: RateLimitResponse): unknown {
  return structToJson(response.dynamic_metadata ?? { fields: {} }).metadata;
}

function quotaSuite(name: string, args: () => readonly string[]): void {
  describe(`quota mode on ${name}`, () => {
    let serve: EnvoyServe;
    const call = (...descriptors: Descriptor[]): Promise<RateLimitResponse> =>
      serve.client.shouldRateLimit({ domain: 'quota', descriptors });
    before(async () => {
      serve = await startEnvoyServe(CONFIG, ['--envoy-metadata', ...args()]);
    });
    after(async () => {
      await serve.stop();
    });

    test('a request passes while one quota-mode descriptor is over, and is refused when every one is', async () => {
      const t = 'q1';
      const first = await call(of(t, 'user', 'u'), of(t, 'plan', 'a'), of(t, 'plan', 'b'));
      assert.equal(first.overall_code, OK);
      assert.deepEqual(
        first.statuses.map((s) => s.limit_remaining),
        [2, 0, 1],
      );
      const second = await call(of(t, 'user', 'u'), of(t, 'plan', 'a'), of(t, 'plan', 'b'));
      assert.equal(second.overall_code, OK);
      assert.deepEqual(codes(second), [OK, OVER_LIMIT, OK]);
      assert.deepEqual(
        second.statuses.map((s) => s.limit_remaining),
        [1, 0, 0],
      );
      const third = await call(of(t, 'user', 'u'), of(t, 'plan', 'a'), of(t, 'plan', 'b'));
      assert.equal(third.overall_code, OVER_LIMIT);
      assert.deepEqual(codes(third), [OK, OVER_LIMIT, OVER_LIMIT]);
      // Nothing was taken from the user limit by the refused request: one unit is still there.
      const alone = await call(of(t, 'user', 'u'));
      assert.deepEqual([alone.overall_code, alone.statuses[0]?.limit_remaining], [OK, 0]);
    });

    test('an ordinary descriptor over refuses the request, and nothing is taken from the quota-mode ones', async () => {
      const t = 'q2';
      const refused = await call(of(t, 'user', 'u', 4), of(t, 'plan', 'b'), of(t, 'pool', 'p'));
      assert.equal(refused.overall_code, OVER_LIMIT);
      assert.deepEqual(codes(refused), [OVER_LIMIT, OK, OK]);
      const look = await call(of(t, 'plan', 'b', 0), of(t, 'pool', 'p', 0));
      assert.deepEqual(
        look.statuses.map((s) => s.limit_remaining),
        [2, 10],
      );
    });

    test('200 concurrent requests on a quota-mode plan of 2 and a pool of 10: exactly 10 pass, both taken to 0', async () => {
      const t = 'q3';
      const responses = await Promise.all(
        Array.from({ length: 200 }, () => call(of(t, 'plan', 'b'), of(t, 'pool', 'p'))),
      );
      assert.equal(responses.filter((r) => r.overall_code === OK).length, 10);
      // The first 2 took from both; the next 8 from the pool alone, the plan being over.
      assert.equal(responses.filter((r) => r.overall_code === OK && r.statuses[0]?.code === OK).length, 2);
      const look = await call(of(t, 'plan', 'b', 0), of(t, 'pool', 'p', 0));
      assert.deepEqual(
        look.statuses.map((s) => s.limit_remaining),
        [0, 0],
      );
      assert.equal(look.overall_code, OVER_LIMIT);
    });

    test('dynamic metadata: the request, and the passing descriptors’ metadata merged in order', async () => {
      const t = 'q4';
      const descriptors = [of(t, 'plan', 'a'), of(t, 'plan', 'b'), of(t, 'user', 'u')];
      const first = await call(...descriptors);
      assert.deepEqual(structToJson(first.dynamic_metadata ?? { fields: {} }), {
        domain: 'quota',
        descriptors: [
          { entries: ['tenant=q4', 'plan=a'] },
          { entries: ['tenant=q4', 'plan=b'] },
          { entries: ['tenant=q4', 'user=u'] },
        ],
        // Maps merge key by key; a key already there keeps the first descriptor's value.
        metadata: {
          route: { primary: 'a', tier: 'gold', backup: 'b' },
          tags: ['x', 'z'],
          weight: 2,
          note: null,
          user: true,
        },
      });
      // Plan a is over now: its metadata is left out.
      assert.deepEqual(metadataOf(await call(...descriptors)), {
        route: { primary: 'b', backup: 'b' },
        weight: 2,
        note: null,
        user: true,
      });
      const body = JSON.stringify({
        domain: 'quota',
        hitsAddend: 1,
        descriptors: [
          {
            entries: [
              { key: 'tenant', value: 'q5' },
              { key: 'plan', value: 'b' },
            ],
          },
        ],
      });
      const json = await httpCall(`${serve.http}/json`, 'POST', body);
      assert.equal(json.status, 200);
      assert.deepEqual(JSON.parse(json.body).dynamicMetadata, {
        domain: 'quota',
        descriptors: [{ entries: ['tenant=q5', 'plan=b'] }],
        hitsAddend: 1,
        metadata: { route: { primary: 'b', backup: 'b' }, weight: 2, note: null },
      });
    });
  });
}

quotaSuite('the memory store', () => []);

let redis: RedisServer | undefined;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});
quotaSuite('Redis', () => ['--redis', (redis as RedisServer).url]);

describe('quota mode on one Redis: what it costs in scripts', () => {
  const onRedis = envoyOnRedis(CONFIG, () => redis as RedisServer);

  test('one script when nothing is over; one more for the quota-mode descriptor set aside', async () => {
    const call = (t: string): Promise<RateLimitResponse> =>
      onRedis.serve().client.shouldRateLimit({
        domain: 'quota',
        descriptors: [of(t, 'user', 'u'), of(t, 'plan', 'a'), of(t, 'plan', 'b')],
      });
    await call('warm');
    let before = await scriptCalls(onRedis.redis());
    assert.equal((await call('s1')).overall_code, OK);
    assert.equal((await scriptCalls(onRedis.redis())) - before, 1);
    before = await scriptCalls(onRedis.redis());
    assert.equal((await call('s1')).overall_code, OK);
    assert.equal((await scriptCalls(onRedis.redis())) - before, 2);
  });
});

describe('--quota-mode: every descriptor in quota mode', () => {
  let serve: EnvoyServe;
  before(async () => {
    serve = await startEnvoyServe(CONFIG, ['--quota-mode']);
  });
  after(async () => {
    await serve.stop();
  });

  test('over only when every descriptor is; a descriptor without a limit always passes, as in the reference', async () => {
    const call = (...descriptors: Descriptor[]): Promise<RateLimitResponse> =>
      serve.client.shouldRateLimit({ domain: 'quota', descriptors });
    for (let i = 0; i < 3; i++) await call(of('g', 'user', 'full'));
    assert.equal((await call(of('g', 'user', 'full'))).overall_code, OVER_LIMIT);
    const mixed = await call(of('g', 'user', 'full'), of('g', 'user', 'fresh'));
    assert.equal(mixed.overall_code, OK);
    assert.deepEqual(codes(mixed), [OVER_LIMIT, OK]);
    assert.equal(mixed.statuses[1]?.limit_remaining, 2);
    const unknown = await call(of('g', 'user', 'full'), of('g', 'nothing', 'here'));
    assert.equal(unknown.overall_code, OK);
  });
});
