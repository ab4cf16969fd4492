// wait() when the store fails: the limiter's onStoreError answers as for limit(). 'allow' lets the call
// go at once, 'deny' refuses it (asked again while maxWaitMs allows), 'fallback' schedules in process.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createLimiter, type FailureMode, gcra, type Limiter, RedisStore } from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { unique } from '../helpers/suites.js';

let server: RedisServer;
let connected: Connected;
before(async () => {
  server = await startRedis();
  connected = await connect('ioredis', server.port);
  // The client connected once; the server is gone for every call of this suite.
  await server.stop();
});
after(async () => {
  await connected.close();
});

function failing(onStoreError: FailureMode): Limiter {
  return createLimiter({
    store: new RedisStore({ client: connected.client }),
    // 10 per second, one at a time: slots 100 ms apart.
    policy: gcra({ limit: 10, periodMs: 1000, burst: 1 }),
    name: unique('down'),
    timeoutMs: 200,
    onStoreError,
  });
}

describe('wait() while the store fails', () => {
  test("'allow': the call goes at once, with the failure's reason", async () => {
    const decision = await failing('allow').wait('a');
    assert.equal(decision.allowed, true);
    assert.match(decision.reason ?? '', /^(store-error|timeout)$/);
  });

  test("'deny': refused with the failure's reason once maxWaitMs leaves no room to ask again", async () => {
    const decision = await failing('deny').wait('a', { maxWaitMs: 0 });
    assert.equal(decision.allowed, false);
    assert.match(decision.reason ?? '', /^(store-error|timeout)$/);
  });

  test("'fallback': slots are scheduled in this process's memory, one interval apart", async () => {
    const limiter = failing('fallback');
    const [first, second] = await Promise.all([limiter.wait('a'), limiter.wait('a')]);
    assert.equal(first?.reason, 'fallback');
    assert.equal(second?.reason, 'fallback');
    assert.equal(first?.allowed && second?.allowed, true);
    // The second slot came an interval after the first: it slept for it.
    assert.ok((second?.waitedMs ?? 0) >= 99, `${second?.waitedMs} ms`);
  });
});
