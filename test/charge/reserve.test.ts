// reserve() and settle(): the estimate taken now, the difference refunded or charged once, in memory and on a real Redis.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { limiterPipeline, type Pipeline } from '../../src/core/index.js';
import { newSettleId } from '../../src/core/reservation.js';
import {
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  gcra,
  type Limiter,
  type Policy,
  RedisStore,
  SLIDING_LOG_MAX_LIMIT,
  type Store,
  slidingLog,
} from '../../src/index.js';
import { OPERATIONS } from '../../src/operations.js';
import { BACKENDS, type Backend, openBackend } from '../helpers/backends.js';
import { connect } from '../helpers/clients.js';
import { startDelayProxy } from '../helpers/delay-proxy.js';
import { isCode } from '../helpers/errors.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { unique } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

// A busy machine must not turn a slow reply into a timeout decision: these tests assert exact decisions.
function make(store: Store, policy: Policy): Limiter {
  return createLimiter({ store, policy, name: unique('reserve'), timeoutMs: 60_000, onStoreError: 'deny' });
}

const TOKENS = () => fixedWindow({ limit: 1000, windowMs: 3_600_000 });

for (const kind of BACKENDS) {
  describe(`reserve() and settle() on ${kind}`, () => {
    let backend: Backend;
    before(async () => {
      backend = await openBackend(kind, server);
    });
    after(async () => {
      await backend.close();
    });
    // Each test but the GCRA one counts exact remainders in TOKENS' hour window: it must not end meanwhile.
    beforeEach(() => clearOfWindowEnd(3_600_000, 10_000));

    test('a lower actual gives the difference back; a higher one charges it, into debt', async () => {
      const limiter = make(backend.store, TOKENS());
      const lower = await limiter.reserve('u', { cost: 100 });
      assert.deepEqual([lower.decision.allowed, lower.decision.remaining, lower.cost], [true, 900, 100]);
      const refunded = await lower.settle(40);
      assert.equal(refunded.remaining, 960);
      assert.equal(lower.settled, true);
      const higher = await limiter.reserve('u', { cost: 100 });
      assert.equal(higher.decision.remaining, 860);
      const charged = await higher.settle(1000);
      assert.deepEqual([charged.allowed, charged.remaining, charged.debt, charged.cutOff], [true, 0, 40, 0]);
      assert.equal((await limiter.peek('u')).allowed, false, 'in debt: refused until it is paid');
    });

    test('settles once: a second settle rejects with ERR_SLUICE_ALREADY_SETTLED and records nothing', async () => {
      const limiter = make(backend.store, TOKENS());
      const reservation = await limiter.reserve('u', { cost: 100 });
      await reservation.settle(150);
      await assert.rejects(reservation.settle(0), isCode(ERROR_CODES.ALREADY_SETTLED));
      await assert.rejects(reservation.settle(500), /settled already, and `settle\(500\)` recorded nothing/);
      assert.equal((await limiter.peek('u')).remaining, 850);
      // Two settles at once: the second is refused while the first is under way.
      const racing = await limiter.reserve('v', { cost: 10 });
      const [first, second] = await Promise.allSettled([racing.settle(20), racing.settle(20)]);
      assert.equal(first.status, 'fulfilled');
      assert.equal(second.status, 'rejected');
      assert.equal((await limiter.peek('v')).remaining, 980);
    });

    test('a settle sent again, by this process or another, is applied once while its window lasts', async () => {
      // Two limiters of one name on one store: two processes. Each sends the same settle (one id).
      const name = unique('settle-once');
      const limiters = [0, 1].map(() =>
        createLimiter({
          store: backend.store,
          policy: TOKENS(),
          name,
          timeoutMs: 60_000,
          onStoreError: 'deny',
        }),
      );
      const send = async (limiter: Limiter, operation: 'charge' | 'refund', amount: number, id: string) => {
        const pipeline = limiterPipeline(limiter) as Pipeline;
        // The operation's own operands with the settle id last (see NO_SETTLE), through the core's entry.
        const own = OPERATIONS[operation].operandsOf?.(pipeline.policy) ?? [];
        return pipeline.call(operation, 'u', amount, undefined, { operands: [...own.slice(0, -1), id] });
      };
      const [first, second] = limiters as [Limiter, Limiter];
      await first.limit('u', { cost: 100 });
      const charged = await send(first, 'charge', 300, newSettleId());
      assert.equal(charged.remaining, 600);
      const refundId = newSettleId();
      await send(first, 'refund', 50, refundId);
      const id = newSettleId();
      for (const limiter of [first, first, second]) await send(limiter, 'charge', 200, id);
      for (const limiter of [second, first]) await send(limiter, 'refund', 50, refundId);
      assert.equal((await second.peek('u')).remaining, 450, '100 + 300 - 50 + 200: each settle once');
    });

    test('an equal actual asks nothing; a refused reservation settles to nothing', async () => {
      const limiter = make(backend.store, TOKENS());
      const exact = await limiter.reserve('u', { cost: 100 });
      const calls = backend.store instanceof RedisStore ? backend.store.calls : 0;
      assert.deepEqual(await exact.settle(100), exact.decision);
      if (backend.store instanceof RedisStore) assert.equal(backend.store.calls, calls);
      await limiter.charge('u', 950);
      const refused = await limiter.reserve('u', { cost: 100 });
      assert.equal(refused.decision.allowed, false);
      assert.deepEqual(await refused.settle(400), refused.decision);
      assert.equal(refused.settled, true);
      // Nothing taken, nothing charged: the 950 charged and the 100 settled exactly are all there is.
      assert.equal((await limiter.charge('u', 1)).debt, 51);
    });

    test('settles under the call’s tag and limit, the key and quota it reserved under', async () => {
      const limiter = make(backend.store, gcra({ limit: 100, periodMs: 60_000 }));
      const reservation = await limiter.reserve('u', { cost: 50, tag: 'team', limit: 200 });
      assert.equal(reservation.decision.limit, 200);
      const settled = await reservation.settle(10);
      assert.deepEqual([settled.limit, settled.remaining], [200, 190]);
      assert.equal((await limiter.peek('u')).remaining, 100, 'the untagged key was not touched');
    });

    test('a bad actual is refused before anything is asked', async () => {
      const limiter = make(backend.store, TOKENS());
      const reservation = await limiter.reserve('u', { cost: 5 });
      for (const actual of [-1, 1.5, Number.NaN, '7']) {
        await assert.rejects(reservation.settle(actual as number), isCode(ERROR_CODES.INVALID_COST));
      }
      assert.equal(reservation.settled, false);
      assert.equal((await reservation.settle(0)).remaining, 1000);
    });
  });
}

describe('a sliding log in debt stays bounded', () => {
  test('a charge of any size holds at most limit + maxDebt entries (2000 at the most)', async () => {
    const backend = await openBackend('ioredis', server);
    try {
      const policy = slidingLog({ limit: SLIDING_LOG_MAX_LIMIT, windowMs: 60_000 });
      const limiter = make(backend.store, policy);
      const charged = await limiter.charge('u', 50_000);
      assert.deepEqual([charged.debt, charged.cutOff], [1000, 48_000]);
      const key = backend.store.keyFor(limiter.name, 'u');
      assert.equal(Number(await backend.redis?.command('ZCARD', key)), 2 * SLIDING_LOG_MAX_LIMIT);
      assert.ok(Number(await backend.redis?.command('PTTL', key)) > 0);
    } finally {
      await backend.close();
    }
  });
});

describe('a settle whose reply is lost, sent again', () => {
  test('on Redis: the script ran, the connection was cut before its reply came; the retry is counted once', async () => {
    // The reservation, the lost settle and its retry (2 s each way through the proxy) count in one hour's window.
    await clearOfWindowEnd(3_600_000, 30_000);
    // Every chunk takes 2 s each way through the proxy: the script runs 2 s after the settle is
    // sent, and its reply would come 2 s after that. The test sees the charge on a direct
    // connection, and cuts the proxy's connections then: the reply is lost.
    const proxy = await startDelayProxy(server.port, 2000);
    const through = await connect('ioredis', proxy.port);
    const direct = await openBackend('ioredis', server);
    try {
      const name = unique('lost-reply');
      const options = { policy: TOKENS(), name, timeoutMs: 60_000, onStoreError: 'deny' } as const;
      const limiter = createLimiter({ ...options, store: new RedisStore({ client: through.client }) });
      const observer = createLimiter({ ...options, store: direct.store });
      const reservation = await limiter.reserve('u', { cost: 100 });
      assert.equal(reservation.decision.remaining, 900);
      const settling = reservation.settle(400);
      settling.catch(() => undefined);
      while ((await observer.peek('u')).remaining !== 600) await delay(10);
      proxy.cut();
      await assert.rejects(settling, isCode(ERROR_CODES.STORE));
      assert.equal(reservation.settled, false, 'the caller may settle again');
      proxy.heal();
      // The client connects again by itself: a look answered by the store says it has.
      while ((await limiter.peek('u')).reason !== undefined) await delay(50);
      const retried = await reservation.settle(400);
      assert.equal(retried.remaining, 600);
      assert.equal((await observer.peek('u')).remaining, 600, '400 counted once, not 100 + 300 + 300');
    } finally {
      await through.close();
      await direct.close();
      await proxy.close();
    }
  });
});
