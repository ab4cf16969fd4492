// A concurrency limiter's store failing, and shadow mode: the failure policy answers acquisitions as for
// every limiter, `fallback` holds the leases in process, and a shadow limiter's lease is still released.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  concurrency,
  createLimiter,
  type Decision,
  type FailureMode,
  type Lease,
  RedisStore,
} from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

let server: RedisServer;
let up: Connected;
before(async () => {
  server = await startRedis();
  up = await connect('ioredis', server.port);
});
after(async () => {
  await up.close();
  await server.stop();
});

/** A limiter of 2 slots whose store is a Redis that was never there (a port nothing listens on). */
async function onDeadStore(mode: FailureMode) {
  const dead = await startRedis();
  const connected = await connect('ioredis', dead.port);
  await dead.stop();
  const limiter = createLimiter({
    store: new RedisStore({ client: connected.client }),
    policy: concurrency({ limit: 2, leaseMs: 60_000 }),
    name: `dead-${mode}`,
    onStoreError: mode,
    timeoutMs: 200,
  });
  return { limiter, close: () => connected.close() };
}

describe('concurrency limits when the store fails', () => {
  test("'fallback' holds the leases in this process: the limit holds, releases free slots there", async () => {
    const { limiter, close } = await onDeadStore('fallback');
    try {
      const first = await limiter.limit('u');
      const second = await limiter.limit('u');
      assert.deepEqual([first.reason, first.allowed, second.allowed], ['fallback', true, true]);
      assert.ok(first.lease && second.lease && second.lease.token > first.lease.token);
      const third = await limiter.limit('u');
      assert.deepEqual([third.allowed, third.reason, third.lease], [false, 'fallback', undefined]);
      const released = await limiter.release('u', first.lease as Lease);
      assert.deepEqual([released.released, released.reason, released.remaining], [true, 'fallback', 1]);
      assert.equal((await limiter.limit('u')).allowed, true);
    } finally {
      await close();
    }
  });

  test("'allow' lets requests through holding nothing; 'deny' refuses; neither has a lease to release", async () => {
    for (const [mode, allowed] of [
      ['allow', true],
      ['deny', false],
    ] as const) {
      const { limiter, close } = await onDeadStore(mode);
      try {
        const decision = await limiter.limit('u');
        assert.deepEqual(
          [decision.allowed, decision.reason, decision.lease],
          [allowed, 'store-error', undefined],
        );
      } finally {
        await close();
      }
    }
  });

  test('a release the store cannot make says so by its reason, and leaves the lease to lapse', async () => {
    const dead = await startRedis();
    const connected = await connect('ioredis', dead.port);
    try {
      const limiter = createLimiter({
        store: new RedisStore({ client: connected.client }),
        policy: concurrency({ limit: 1, leaseMs: 60_000 }),
        name: 'lost',
        timeoutMs: 60_000,
      });
      const { lease } = await limiter.limit('u');
      await dead.stop();
      const released = await limiter.release('u', lease as Lease);
      assert.equal(released.reason, 'store-error');
      assert.equal(released.released, undefined);
    } finally {
      await connected.close();
    }
  });
});

describe('concurrency limits in shadow mode', () => {
  test('over the limit, callers are let through without a lease; under it, the lease is held and released as enforced', async () => {
    const decisions: Decision[] = [];
    const limiter = createLimiter({
      store: new RedisStore({ client: up.client }),
      policy: concurrency({ limit: 1, leaseMs: 60_000 }),
      name: 'shadow',
      enforce: false,
      timeoutMs: 60_000,
      onDecision: (decision) => decisions.push(decision),
    });
    const held = await limiter.limit('u');
    assert.equal(held.wouldAllow, true);
    assert.ok(held.lease, 'the slot taken in the store is the caller to release');
    const over = await limiter.limit('u');
    assert.deepEqual([over.allowed, over.wouldAllow, over.lease], [true, false, undefined]);
    assert.equal(decisions[1]?.allowed, false, 'the hook sees the real verdict');
    assert.equal((await limiter.release('u', held.lease)).released, true);
    assert.equal((await limiter.limit('u')).wouldAllow, true);
  });
});
