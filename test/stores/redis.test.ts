// RedisStore on a real server: scripts lost (SCRIPT FLUSH, FUNCTION FLUSH, a restart) are reloaded
// without an error reaching the caller; keys are laid out, tagged and expired as documented.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  createLimiter,
  fixedWindow,
  gcra,
  type Policy,
  RedisStore,
  SluiceError,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { keySlot } from '../../src/stores/redis/slot.js';
import { CLIENT_KINDS, type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene, openVariant } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

// A busy machine must not turn a slow reply into a timeout decision: these tests are about the store.
const PATIENT_MS = 60_000;

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

async function errorCount(connected: Connected, prefix: string): Promise<number> {
  const info = String(await connected.command('INFO', 'errorstats'));
  const match = new RegExp(`errorstat_${prefix}:count=(\\d+)`).exec(info);
  return match ? Number(match[1]) : 0;
}

async function waitUntilAnswering(connected: Connected): Promise<void> {
  for (let i = 0; i < 500; i++) {
    try {
      if ((await connected.command('PING')) === 'PONG') return;
    } catch {}
    await sleep(10);
  }
  throw new Error('client did not reconnect');
}

for (const kind of CLIENT_KINDS) {
  describe(`scripts lost on the server, ${kind}`, () => {
    test('SCRIPT FLUSH in the middle of a run: no error reaches the caller, counts stay exact', async () => {
      // The 400 calls count to the limit of 300 in one hour's window: it must not end meanwhile.
      await clearOfWindowEnd(3_600_000, 30_000);
      const { connected, store } = await openVariant(kind, 'scripts', server.port, `flush-${kind}`);
      const limiter = createLimiter({
        store,
        policy: fixedWindow({ limit: 300, windowMs: 3_600_000 }),
        name: 'f',
        timeoutMs: PATIENT_MS,
      });
      const before = await errorCount(connected, 'NOSCRIPT');
      const first = await Promise.all(Array.from({ length: 200 }, () => limiter.limit('id')));
      await connected.command('SCRIPT', 'FLUSH');
      const second = await Promise.all(Array.from({ length: 200 }, () => limiter.limit('id')));
      assert.equal(first.filter((d) => d.allowed).length, 200);
      assert.equal(second.filter((d) => d.allowed).length, 100);
      assert.ok(
        (await errorCount(connected, 'NOSCRIPT')) > before,
        'the flush was noticed (NOSCRIPT) and survived',
      );
      await assertHygiene(connected);
      await connected.close();
    });

    test('FUNCTION FLUSH in the middle of a run (functions mode): no error reaches the caller', async () => {
      // The 400 calls count to the limit of 300 in one hour's sliding window: it must not end meanwhile.
      await clearOfWindowEnd(3_600_000, 30_000);
      const { connected, store } = await openVariant(kind, 'functions', server.port, `fflush-${kind}`);
      const limiter = createLimiter({
        store,
        policy: slidingWindow({ limit: 300, windowMs: 3_600_000 }),
        name: 'f',
        timeoutMs: PATIENT_MS,
      });
      const first = await Promise.all(Array.from({ length: 200 }, () => limiter.limit('id')));
      await connected.command('FUNCTION', 'FLUSH');
      const second = await Promise.all(Array.from({ length: 200 }, () => limiter.limit('id')));
      assert.equal(first.filter((d) => d.allowed).length, 200);
      assert.equal(second.filter((d) => d.allowed).length, 100);
      const libraries = JSON.stringify(await connected.command('FUNCTION', 'LIST'));
      assert.match(libraries, /sluice_[0-9a-f]{12}/, 'the library was loaded again');
      await connected.close();
    });

    test('a restarted server (empty, no scripts): decisions resume without an error once the client reconnects', async () => {
      const { connected, store } = await openVariant(kind, 'scripts', server.port, `restart-${kind}`);
      const limiter = createLimiter({
        store,
        policy: gcra({ limit: 5, periodMs: 60_000 }),
        name: 'r',
        timeoutMs: PATIENT_MS,
      });
      assert.equal((await limiter.limit('id')).remaining, 4);
      await server.restart();
      await waitUntilAnswering(connected);
      const after = await limiter.limit('id');
      // The restarted server lost its state: the identifier starts afresh, decided by the reloaded script.
      assert.equal(after.allowed, true);
      assert.equal(after.remaining, 4);
      await connected.close();
    });
  });
}

describe('errors other than NOSCRIPT reach the caller and are not retried', () => {
  test('WRONGTYPE from a key of another type: rejected with ERR_SLUICE_STORE, the script sent once', async () => {
    const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'wrong');
    await connected.command('SET', store.keyFor('log', 'id'), 'not a sorted set', 'PX', 60_000);
    const policy = slidingLog({ limit: 5, windowMs: 1000 });
    // The store rejects; the limiter turns that into an `onStoreError` decision and hands the error to `onError`.
    const errors: SluiceError[] = [];
    const limiter = createLimiter({
      store,
      policy,
      name: 'log',
      timeoutMs: PATIENT_MS,
      onStoreError: 'deny',
      onError: (error) => errors.push(error),
    });
    await limiter.limit('warm-up'); // loads the script, so the next call meets WRONGTYPE, not NOSCRIPT
    const calls = store.calls;
    const request = {
      policy,
      name: 'log',
      identifier: 'id',
      operation: 'limit',
      cost: 1,
      now: undefined,
    } as const;
    await assert.rejects(store.decide(request), (error: unknown) => {
      assert.ok(error instanceof SluiceError);
      assert.equal(error.code, 'ERR_SLUICE_STORE');
      assert.match(error.message, /WRONGTYPE/);
      return true;
    });
    const decision = await limiter.limit('id');
    assert.deepEqual([decision.allowed, decision.reason], [false, 'store-error']);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.code, 'ERR_SLUICE_STORE');
    assert.match(errors[0]?.message ?? '', /WRONGTYPE/);
    assert.equal(store.calls - calls, 2, 'one call each, no retry');
    await connected.close();
  });
});

describe('keys', () => {
  test('layout <prefix>:<name>:{<identifier>}, braces and % escaped one-to-one', async () => {
    // The keys expire at the end of their minute: it must not fall before KEYS lists them.
    await clearOfWindowEnd(60_000, 5_000);
    const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'layout');
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 5, windowMs: 60_000 }),
      name: 'api',
      timeoutMs: PATIENT_MS,
    });
    for (const id of ['client-42', 'a}b{c', '{', '%7B', '%']) await limiter.limit(id);
    const keys = ((await connected.command('KEYS', 'layout:*')) as string[]).sort();
    assert.deepEqual(keys, [
      'layout:api:{%257B}',
      'layout:api:{%25}',
      'layout:api:{%7B}',
      'layout:api:{a%7Db%7Bc}',
      'layout:api:{client-42}',
    ]);
    await connected.close();
  });

  test('slots follow the hash tag, as CLUSTER KEYSLOT computes them', () => {
    assert.equal(keySlot('somekey'), 11058);
    assert.equal(keySlot('foo{hash_tag}'), 2515);
    assert.equal(keySlot('rl:api:{client-42}'), keySlot('client-42'));
    assert.equal(keySlot('rl:other:{client-42}'), keySlot('rl:api:{client-42}'));
    assert.equal(keySlot('{}x'), keySlot('{}x'));
  });

  test('every key gets an expiry no longer than its state matters', async () => {
    // The fixed window's key expires at the end of its minute: it must not fall before PTTL reads it.
    await clearOfWindowEnd(60_000, 5_000);
    const { connected, store } = await openVariant('node-redis', 'scripts', server.port, 'ttl');
    const cases: Array<[Policy, number]> = [
      [fixedWindow({ limit: 5, windowMs: 60_000 }), 60_000],
      [slidingWindow({ limit: 5, windowMs: 60_000 }), 120_000],
      [slidingLog({ limit: 5, windowMs: 60_000 }), 60_000],
      // GCRA and the token bucket: the TAT, rounded up to Redis's next whole second (gcra.lua).
      [tokenBucket({ capacity: 10, refillPerSecond: 1 }), 2000],
      [gcra({ limit: 10, periodMs: 60_000, burst: 10 }), 7000],
    ];
    for (const [index, [policy, most]] of cases.entries()) {
      const limiter = createLimiter({ store, policy, name: `p${index}`, timeoutMs: PATIENT_MS });
      await limiter.limit('id');
      const pttl = Number(await connected.command('PTTL', store.keyFor(`p${index}`, 'id')));
      assert.ok(pttl > 0 && pttl <= most, `${policy.description}: PTTL ${pttl}, at most ${most}`);
    }
    await assertHygiene(connected);
    await connected.close();
  });
});

describe('coalescing', () => {
  test('decisions of one tick share script calls; maxBatch bounds them', async () => {
    const connected = await connect('ioredis', server.port);
    const coalesced = new RedisStore({ client: connected.client, prefix: 'co' });
    const single = new RedisStore({ client: connected.client, prefix: 'co1', maxBatch: 1 });
    const policy = tokenBucket({ capacity: 1000, refillPerSecond: 1 });
    const a = createLimiter({ store: coalesced, policy, name: 'a', timeoutMs: PATIENT_MS });
    const b = createLimiter({ store: single, policy, name: 'b', timeoutMs: PATIENT_MS });
    await Promise.all(Array.from({ length: 300 }, (_, i) => a.limit(`id${i % 7}`)));
    await Promise.all(Array.from({ length: 300 }, (_, i) => b.limit(`id${i % 7}`)));
    assert.equal(coalesced.calls, 5, '300 decisions in 5 calls of at most 64');
    assert.equal(single.calls, 300);
    const peeks = await Promise.all(Array.from({ length: 7 }, (_, i) => a.peek(`id${i}`)));
    assert.deepEqual(
      peeks.map((d) => d.remaining),
      Array.from({ length: 7 }, (_, i) => 1000 - Math.ceil((300 - i) / 7)),
    );
    await connected.close();
  });

  test('while a batch is in flight, calls made in separate callbacks of one turn share the next script call', async () => {
    const connected = await connect('ioredis', server.port);
    const pauser = await connect('ioredis', server.port);
    const store = new RedisStore({ client: connected.client, prefix: 'turn' });
    const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
    const limiter = createLimiter({ store, policy, name: 'turn', timeoutMs: PATIENT_MS });
    try {
      await limiter.limit('warm');
      const before = store.calls;
      // The server holds every command for 300 ms: the first call's batch stays in flight meanwhile.
      await pauser.command('CLIENT', 'PAUSE', '300');
      const first = limiter.limit('first');
      // Two immediates, each a callback of its own in one turn (queued together, they run in the same
      // check phase; two timers of 0 ms may fall in two turns on a busy machine): each used to flush its
      // own tick's one call.
      const later = await new Promise<Promise<unknown>[]>((resolve) => {
        const made: Promise<unknown>[] = [];
        setImmediate(() => made.push(limiter.limit('b')));
        setImmediate(() => {
          made.push(limiter.limit('c'));
          resolve(made);
        });
      });
      await Promise.all([first, ...later]);
      assert.equal(store.calls - before, 2, 'the first call, then b and c in one script call');
      // Idle again: one call goes at the end of its tick, alone, as before.
      await limiter.limit('d');
      assert.equal(store.calls - before, 3);
    } finally {
      await pauser.close();
      await connected.close();
    }
  });
});

test('each client library is named as itself in store.client', async () => {
  for (const kind of CLIENT_KINDS) {
    const connected = await connect(kind, server.port);
    try {
      assert.deepEqual(new RedisStore({ client: connected.client }).client, {
        library: kind,
        cluster: false,
      });
    } finally {
      await connected.close();
    }
  }
});
