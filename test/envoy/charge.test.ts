// `charge_over_limit` through a real `sluice serve --envoy` process and a gRPC client: the check of
// 0 hits on the request, the charge of the response's usage on stream done, into debt and out of it.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  awayFromMinuteEnd,
  configDir,
  type Descriptor,
  type EnvoyServe,
  eventually,
  OK,
  OVER_LIMIT,
  type RateLimitRequest,
  startEnvoyServe,
} from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

// Tokens per user: 1000 per minute in a fixed window, and a bucket of 1000 refilled in 2 s whose
// debt is paid off while the test waits; `plain` is an ordinary rule beside them.
const CONFIG = `domain: llm
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 1000
      charge_over_limit: true
      timeout: 5s
  - key: bucket
    rate_limit:
      algorithm: tokenBucket
      window: 2s
      requests_per_unit: 1000
      charge_over_limit: true
      timeout: 5s
  - key: plain
    rate_limit:
      unit: minute
      requests_per_unit: 2
      timeout: 5s
`;

const of = (key: string, value: string, hits?: number): Descriptor => ({
  entries: [{ key, value }],
  ...(hits === undefined ? {} : { hits_addend: { value: hits } }),
});
const call = (...descriptors: Descriptor[]): RateLimitRequest => ({ domain: 'llm', descriptors });

function chargeSuite(name: string, args: () => readonly string[]): void {
  describe(`charge_over_limit on ${name}`, () => {
    let serve: EnvoyServe;
    before(async () => {
      serve = await startEnvoyServe(join(configDir({ 'llm.yaml': CONFIG }), 'llm.yaml'), args());
    });
    after(async () => {
      await serve.stop();
    });

    test('the check of 0 hits passes until the usage charged on stream done reaches the limit; charges pass it, into debt', async () => {
      await awayFromMinuteEnd();
      const user = `u-${Date.now()}`;
      const check = () => serve.client.shouldRateLimit(call(of('user', user, 0)));
      const first = await check();
      assert.deepEqual([first.overall_code, first.statuses[0]?.limit_remaining], [OK, 1000]);
      const charged = await serve.client.shouldRateLimit(call(of('user', user, 600)));
      assert.deepEqual([charged.overall_code, charged.statuses[0]?.limit_remaining], [OK, 400]);
      assert.equal((await check()).overall_code, OK);
      // Past the limit: the stream is done, the tokens were used; the call answers OK and takes them.
      const past = await serve.client.shouldRateLimit(call(of('user', user, 700)));
      assert.deepEqual([past.overall_code, past.statuses[0]?.limit_remaining], [OK, 0]);
      const refused = await check();
      assert.deepEqual([refused.overall_code, refused.statuses[0]?.code], [OVER_LIMIT, OVER_LIMIT]);
      // The request's own hits_addend charges too; another user is untouched.
      const requestHits = await serve.client.shouldRateLimit({
        ...call(of('user', `${user}-b`)),
        hits_addend: 250,
      });
      assert.deepEqual([requestHits.overall_code, requestHits.statuses[0]?.limit_remaining], [OK, 750]);
    });

    test('a charge answers OK beside an ordinary descriptor that is over, and is taken all the same', async () => {
      await awayFromMinuteEnd();
      const user = `m-${Date.now()}`;
      for (let i = 0; i < 2; i++) await serve.client.shouldRateLimit(call(of('plain', user)));
      const mixed = await serve.client.shouldRateLimit(call(of('plain', user), of('user', user, 1500)));
      assert.equal(mixed.overall_code, OVER_LIMIT);
      assert.deepEqual(
        mixed.statuses.map((status) => status.code),
        [OVER_LIMIT, OK],
      );
      assert.equal((await serve.client.shouldRateLimit(call(of('user', user, 0)))).overall_code, OVER_LIMIT);
    });

    test('once in debt, the check refuses until the bucket has refilled what is owed', async () => {
      const user = `b-${Date.now()}`;
      const check = () => serve.client.shouldRateLimit(call(of('bucket', user, 0)));
      await serve.client.shouldRateLimit(call(of('bucket', user, 1400)));
      assert.equal((await check()).overall_code, OVER_LIMIT);
      // 400 owed at 500 a second: the check passes again within a second or so, and stays refused before.
      await eventually('the debt paid off', async () => (await check()).overall_code === OK);
      const after = await check();
      assert.ok((after.statuses[0]?.limit_remaining ?? 0) < 1000, 'what was owed is not forgotten');
    });
  });
}

chargeSuite('memory', () => []);

describe('on Redis', () => {
  let server: RedisServer;
  before(async () => {
    server = await startRedis();
  });
  after(async () => {
    await server.stop();
  });
  chargeSuite('Redis', () => ['--redis', server.url]);
});
