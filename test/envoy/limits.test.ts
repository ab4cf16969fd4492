// Decisions through gRPC on the memory store and on Redis: exact counts under concurrency, descriptors
// decided together, hits, overrides, refusals, the HTTP twins and the metrics they leave.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { parseList } from 'structured-headers';
import {
  awayFromMinuteEnd,
  type Descriptor,
  type EnvoyServe,
  envoyOnRedis,
  FIXTURES,
  HOUR_MS,
  httpCall,
  metric,
  OK,
  OVER_LIMIT,
  type RateLimitRequest,
  scriptCalls,
  startEnvoyServe,
  UNIT,
} from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

// Counts are read within one fixed window: no test starts in the last seconds of an hour's.
beforeEach(() => clearOfWindowEnd(HOUR_MS, 10_000));

const CONFIG = join(FIXTURES, 'limits.yaml');

function request(...descriptors: Descriptor[]): RateLimitRequest {
  return { domain: 'limits', descriptors };
}

function one(key: string, value: string, extra: Partial<Descriptor> = {}): Descriptor {
  return { entries: [{ key, value }], ...extra };
}

function decisionSuite(name: string, args: () => readonly string[]): void {
  describe(`decisions on ${name}`, () => {
    let serve: EnvoyServe;
    before(async () => {
      serve = await startEnvoyServe(CONFIG, args());
    });
    after(async () => {
      await serve.stop();
    });

    test('500 concurrent calls for one descriptor at 100 per minute: exactly 100 OK', async () => {
      await awayFromMinuteEnd();
      const value = `c-${Date.now()}`;
      const responses = await Promise.all(
        Array.from({ length: 500 }, () => serve.client.shouldRateLimit(request(one('burst100', value)))),
      );
      assert.equal(responses.filter((r) => r.overall_code === OK).length, 100);
      assert.equal(responses.filter((r) => r.overall_code === OVER_LIMIT).length, 400);
      const remaining = responses
        .filter((r) => r.overall_code === OK)
        .map((r) => r.statuses[0]?.limit_remaining);
      assert.deepEqual(
        [...remaining].sort((a, b) => (a as number) - (b as number)),
        Array.from({ length: 100 }, (_, i) => i),
      );
    });

    test('two descriptors, one over: nothing is taken from the other', async () => {
      const both = request(one('user', 'u1'), one('tenant', 't1'));
      for (let i = 0; i < 2; i++) assert.equal((await serve.client.shouldRateLimit(both)).overall_code, OK);
      const over = await serve.client.shouldRateLimit(both);
      assert.equal(over.overall_code, OVER_LIMIT);
      assert.equal(over.statuses[0]?.code, OK);
      assert.equal(over.statuses[0]?.limit_remaining, 3);
      assert.equal(over.statuses[1]?.code, OVER_LIMIT);
      const alone = await serve.client.shouldRateLimit(request(one('user', 'u1')));
      assert.equal(alone.statuses[0]?.limit_remaining, 2);
    });

    test('different hits per descriptor, and one rule matched twice (side by side): nothing is kept when one is over', async () => {
      const mixed = request(
        one('user', 'u2', { hits_addend: { value: 3 } }),
        one('tenant', 't2', { hits_addend: { value: 2 } }),
      );
      assert.equal((await serve.client.shouldRateLimit(mixed)).overall_code, OK);
      const over = await serve.client.shouldRateLimit(mixed);
      assert.equal(over.overall_code, OVER_LIMIT);
      assert.equal(
        (await serve.client.shouldRateLimit(request(one('user', 'u2')))).statuses[0]?.limit_remaining,
        1,
      );
      const twice = request(one('user', 'u3'), one('user', 'u4'), one('blocked', 'x'));
      assert.equal((await serve.client.shouldRateLimit(twice)).overall_code, OVER_LIMIT);
      const sameRule = await serve.client.shouldRateLimit(request(one('user', 'u3'), one('user', 'u4')));
      assert.deepEqual(
        sameRule.statuses.map((s) => s.limit_remaining),
        [4, 4],
      );
    });

    test('hits: the descriptor’s own (0 looks without taking), else the request’s, else 1', async () => {
      const three = await serve.client.shouldRateLimit({ ...request(one('user', 'h1')), hits_addend: 3 });
      assert.equal(three.statuses[0]?.limit_remaining, 2);
      const zero = request(one('user', 'h1', { hits_addend: { value: 0 } }));
      const lookWithRoom = await serve.client.shouldRateLimit(zero);
      assert.equal(lookWithRoom.overall_code, OK);
      assert.equal(lookWithRoom.statuses[0]?.limit_remaining, 2);
      const own = await serve.client.shouldRateLimit({
        ...request(one('user', 'h1', { hits_addend: { value: 2 } })),
        hits_addend: 4,
      });
      assert.equal(own.statuses[0]?.limit_remaining, 0);
      // A check of 0 hits takes nothing, and is over once nothing is left for one more hit.
      const lookWhenFull = await serve.client.shouldRateLimit(zero);
      assert.equal(lookWhenFull.overall_code, OVER_LIMIT);
      assert.equal(lookWhenFull.statuses[0]?.code, OVER_LIMIT);
      assert.equal(lookWhenFull.statuses[0]?.limit_remaining, 0);
      assert.equal((await serve.client.shouldRateLimit(request(one('user', 'h1')))).overall_code, OVER_LIMIT);
    });

    test('more hits than the limit grants: over, nothing taken, what is left and the reset reported exactly', async () => {
      const tooMany = await serve.client.shouldRateLimit(
        request(one('user', 'h2', { hits_addend: { value: 6 } }), one('tenant', 'h2')),
      );
      assert.equal(tooMany.overall_code, OVER_LIMIT);
      assert.equal(tooMany.statuses[0]?.code, OVER_LIMIT);
      assert.equal(tooMany.statuses[0]?.limit_remaining, 5);
      assert.equal(tooMany.statuses[1]?.limit_remaining, 2);
      // A full token bucket is at its full allowance now: 0 s to it, not the end of a fixed hour.
      const bucket = await serve.client.shouldRateLimit(
        request(one('bucket', 'h2', { hits_addend: { value: 3 } })),
      );
      assert.equal(bucket.statuses[0]?.code, OVER_LIMIT);
      assert.equal(bucket.statuses[0]?.limit_remaining, 2);
      assert.deepEqual(bucket.statuses[0]?.duration_until_reset, { seconds: 0, nanos: 0 });
      const after = await serve.client.shouldRateLimit(request(one('user', 'h2'), one('bucket', 'h2')));
      assert.deepEqual(
        after.statuses.map((s) => s.limit_remaining),
        [4, 1],
      );
    });

    test('a limit override takes the rule’s place with its own unit; with no rule it is the limit alone', async () => {
      const override = { requests_per_unit: 2, unit: 3 };
      const first = await serve.client.shouldRateLimit(request(one('user', 'o1', { limit: override })));
      assert.deepEqual(first.statuses[0]?.current_limit, { name: '', requests_per_unit: 2, unit: UNIT.HOUR });
      assert.equal(first.statuses[0]?.limit_remaining, 1);
      await serve.client.shouldRateLimit(request(one('user', 'o1', { limit: override })));
      assert.equal(
        (await serve.client.shouldRateLimit(request(one('user', 'o1', { limit: override })))).overall_code,
        OVER_LIMIT,
      );
      const noRule = await serve.client.shouldRateLimit(
        request(one('nothing', 'here', { limit: { requests_per_unit: 1, unit: 4 } })),
      );
      assert.deepEqual(noRule.statuses[0]?.current_limit, { name: '', requests_per_unit: 1, unit: UNIT.DAY });
    });

    test('a quota of 0 is over without taking from the others; other algorithms report exact remaining', async () => {
      const blocked = await serve.client.shouldRateLimit(request(one('blocked', 'b'), one('tenant', 'b')));
      assert.equal(blocked.overall_code, OVER_LIMIT);
      assert.equal(blocked.statuses[1]?.limit_remaining, 2);
      const sliding = await serve.client.shouldRateLimit(request(one('sliding', 's')));
      assert.equal(sliding.statuses[0]?.limit_remaining, 2);
      assert.equal(sliding.statuses[0]?.current_limit?.unit, UNIT.UNKNOWN);
      const bucket = await serve.client.shouldRateLimit(request(one('bucket', 'b')));
      assert.equal(bucket.statuses[0]?.limit_remaining, 1);
      assert.ok((bucket.statuses[0]?.duration_until_reset?.seconds ?? 0) > 0);
    });

    test('an empty domain or no descriptors: INVALID_ARGUMENT, counted over gRPC and POST /json alike', async () => {
      const counted = (): Promise<number> =>
        metric(serve.http, 'ratelimit_service_should_rate_limit_error_total', { err_type: 'service_error' });
      const before = await counted();
      await assert.rejects(serve.client.shouldRateLimit({ domain: '', descriptors: [one('user', 'x')] }), {
        code: status.INVALID_ARGUMENT,
        details: 'rate limit domain must not be empty',
      });
      await assert.rejects(serve.client.shouldRateLimit({ domain: 'limits', descriptors: [] }), {
        code: status.INVALID_ARGUMENT,
      });
      assert.equal(await counted(), before + 2);
      const empty = JSON.stringify({ domain: '', descriptors: [{ entries: [{ key: 'user', value: 'x' }] }] });
      assert.equal((await httpCall(`${serve.http}/json`, 'POST', empty)).status, 400);
      assert.equal((await httpCall(`${serve.http}/json`, 'POST', '{"domain": 5}')).status, 400);
      assert.equal(await counted(), before + 4);
    });

    test('POST /json answers 200, 429 and 400; GET /healthcheck answers OK', async () => {
      const body = JSON.stringify({
        domain: 'limits',
        descriptors: [{ entries: [{ key: 'tenant', value: 'j' }] }],
      });
      const first = await httpCall(`${serve.http}/json`, 'POST', body);
      assert.equal(first.status, 200);
      assert.deepEqual(JSON.parse(first.body).statuses[0].currentLimit, { requestsPerUnit: 2, unit: 'HOUR' });
      assert.equal(JSON.parse(first.body).statuses[0].limitRemaining, 1);
      await httpCall(`${serve.http}/json`, 'POST', body);
      const over = await httpCall(`${serve.http}/json`, 'POST', body);
      assert.equal(over.status, 429);
      assert.equal(JSON.parse(over.body).overallCode, 'OVER_LIMIT');
      assert.equal((await httpCall(`${serve.http}/json`, 'POST', '{"domain": 5}')).status, 400);
      assert.deepEqual(await httpCall(`${serve.http}/healthcheck`), { status: 200, body: 'OK' });
    });

    test('metrics count hits within, near and over the limit, under the reference’s names', async () => {
      const labels = { domain: 'limits', key1: 'tenant', key2: '' };
      const before = {
        hits: await metric(serve.http, 'ratelimit_service_rate_limit_total_hits_total', labels),
        over: await metric(serve.http, 'ratelimit_service_rate_limit_over_limit_total', labels),
        within: await metric(serve.http, 'ratelimit_service_rate_limit_within_limit_total', labels),
      };
      for (let i = 0; i < 3; i++) await serve.client.shouldRateLimit(request(one('tenant', 'm')));
      assert.equal(
        await metric(serve.http, 'ratelimit_service_rate_limit_total_hits_total', labels),
        before.hits + 3,
      );
      assert.equal(
        await metric(serve.http, 'ratelimit_service_rate_limit_within_limit_total', labels),
        before.within + 2,
      );
      assert.equal(
        await metric(serve.http, 'ratelimit_service_rate_limit_over_limit_total', labels),
        before.over + 1,
      );
      assert.equal(await metric(serve.http, 'ratelimit_service_config_load_success_total'), 1);
      assert.ok(
        (await metric(serve.http, 'ratelimit_service_response_time_seconds_count', {
          grpc_method: 'ShouldRateLimit',
        })) > 0,
      );
    });

    test('requests of 3 hits against 5: every hit of a refused request counts as over', async () => {
      const labels = { domain: 'limits', key1: 'user', key2: '' };
      const names = ['total_hits', 'within_limit', 'near_limit', 'over_limit'] as const;
      const read = async (): Promise<number[]> =>
        Promise.all(
          names.map((name) => metric(serve.http, `ratelimit_service_rate_limit_${name}_total`, labels)),
        );
      const before = await read();
      const codes: number[] = [];
      for (let i = 0; i < 5; i++) {
        codes.push(
          (await serve.client.shouldRateLimit({ ...request(one('user', 'm3')), hits_addend: 3 }))
            .overall_code,
        );
      }
      assert.deepEqual(codes, [OK, OVER_LIMIT, OVER_LIMIT, OVER_LIMIT, OVER_LIMIT]);
      const after = await read();
      // total 15, within 3, near 0 (3 taken of 5 stay under 80%), over 12: the 4 refused requests took none of their hits.
      assert.deepEqual(
        after.map((value, i) => value - (before[i] as number)),
        [15, 3, 0, 12],
      );
    });
  });
}

decisionSuite('the memory store', () => []);

let redis: RedisServer | undefined;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});
decisionSuite('Redis', () => ['--redis', (redis as RedisServer).url]);

describe('on one Redis, a request is one script', () => {
  const onRedis = envoyOnRedis(CONFIG, () => redis as RedisServer);

  test('two descriptors of a request: one atomic script, their keys sharing the domain’s hash tag', async () => {
    await onRedis.serve().client.shouldRateLimit(request(one('user', 'warm'), one('tenant', 'warm')));
    const before = await scriptCalls(onRedis.redis());
    await onRedis.serve().client.shouldRateLimit(request(one('user', 'r1'), one('tenant', 'r1')));
    assert.equal((await scriptCalls(onRedis.redis())) - before, 1);
    assert.deepEqual((await onRedis.redis().keys('rl:limits.*r1')).sort(), [
      'rl:limits.tenant|fixedWindow|3600000:{limits}:tenant=r1',
      'rl:limits.user|fixedWindow|3600000:{limits}:user=r1',
    ]);
  });
});

describe('the global shadow mode and the RateLimit headers', () => {
  let serve: EnvoyServe;
  before(async () => {
    serve = await startEnvoyServe(CONFIG, ['--shadow', '--envoy-headers']);
  });
  after(async () => {
    await serve.stop();
  });

  test('--shadow answers OK over the limit, keeps each status, and counts it', async () => {
    const over = request(one('blocked', 'g'));
    const response = await serve.client.shouldRateLimit(over);
    assert.equal(response.overall_code, OK);
    assert.equal(response.statuses[0]?.code, OVER_LIMIT);
    assert.equal(await metric(serve.http, 'ratelimit_service_global_shadow_mode_total'), 1);
  });

  test('--envoy-headers: a RateLimit item per descriptor with a limit, named after its rule', async () => {
    const response = await serve.client.shouldRateLimit(
      request(one('user', 'hd'), one('tenant', 'hd'), one('sliding', 'hd'), one('nothing', 'hd')),
    );
    const headers = Object.fromEntries(response.response_headers_to_add.map((h) => [h.key, h.value]));
    const policies = parseList(headers['RateLimit-Policy'] ?? '');
    assert.deepEqual(
      policies.map(([name, params]) => [name, params.get('q'), params.get('w')]),
      [
        ['limits.user', 5, 3600],
        ['limits.tenant', 2, 3600],
        ['limits.sliding', 3, 90],
      ],
    );
    const items = parseList(headers.RateLimit ?? '');
    assert.deepEqual(
      items.map(([name, params]) => [name, params.get('r')]),
      [
        ['limits.user', 4],
        ['limits.tenant', 1],
        ['limits.sliding', 2],
      ],
    );
    assert.equal(headers['Retry-After'], undefined);
    assert.equal(response.raw_body.length, 0);
  });
});

describe('--envoy-headers on a refused request', () => {
  let serve: EnvoyServe;
  before(async () => {
    serve = await startEnvoyServe(CONFIG, ['--envoy-headers']);
  });
  after(async () => {
    await serve.stop();
  });

  test('the violated limits are named in a problem body, sent with Retry-After', async () => {
    const refused = request(
      one('user', 'pb'),
      one('tenant', 'pb', { hits_addend: { value: 3 } }),
      one('blocked', 'pb'),
    );
    const response = await serve.client.shouldRateLimit(refused);
    assert.equal(response.overall_code, OVER_LIMIT);
    const headers = Object.fromEntries(response.response_headers_to_add.map((h) => [h.key, h.value]));
    assert.equal(parseList(headers.RateLimit ?? '').length, 3);
    assert.equal(headers['Content-Type'], 'application/problem+json');
    assert.ok(Number(headers['Retry-After']) > 0);
    const problem = JSON.parse(response.raw_body.toString('utf8'));
    assert.equal(problem.status, 429);
    assert.deepEqual(problem['violated-policies'], ['limits.tenant', 'limits.blocked']);
  });
});
