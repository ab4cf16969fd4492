// loginGuard(): failed logins per username and per address, in memory and on a real Redis with both clients, including Redis going away.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ERROR_CODES,
  type LoginGuard,
  loginGuard,
  MemoryStore,
  normalizeUsername,
  RedisStore,
  SluiceError,
} from '../../src/index.js';
import { keySlot } from '../../src/stores/redis/slot.js';
import { BACKENDS, type Backend, openBackend } from '../helpers/backends.js';
import { CLIENT_KINDS, connect } from '../helpers/clients.js';
import { isCode } from '../helpers/errors.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const T0 = 1_700_000_000_000;
const MINUTES_15 = 15 * 60_000;
const IP = '203.0.113.7';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

test('usernames are normalised: NFKC, case folded, trimmed', () => {
  for (const spelling of ['Alice', 'ALICE', 'alice', ' alice ', 'ａｌｉｃｅ', 'Ａlice']) {
    assert.equal(normalizeUsername(spelling), 'alice', spelling);
  }
  assert.equal(normalizeUsername('Straße'), normalizeUsername('STRASSE'));
  assert.equal(normalizeUsername('ﬁona'), 'fiona'); // the ligature is two letters under NFKC
  assert.equal(normalizeUsername('Ωmega'), normalizeUsername('ωMEGA'));
  assert.notEqual(normalizeUsername('alice'), normalizeUsername('alicia'));
});

test('options are validated', () => {
  const store = new MemoryStore();
  try {
    const isInvalid = isCode(ERROR_CODES.INVALID_OPTION);
    assert.throws(() => loginGuard({ store, perUsername: { limit: 0, windowMs: MINUTES_15 } }), isInvalid);
    assert.throws(() => loginGuard({ store, perIp: { limit: 100 } as never }), isInvalid);
    assert.throws(() => loginGuard({ store, perIP: {} } as never), isInvalid);
    assert.throws(() => loginGuard({ store, name: 'lo{gin' }), isInvalid);
    assert.throws(() => loginGuard({ store, timeoutMs: 0 }), isInvalid);
    assert.throws(() => loginGuard({ store: {} as never }), isInvalid);
    const guard = loginGuard({ store });
    assert.equal(guard.limiters.username.policy.description, 'slidingLog(limit=5,windowMs=900000)');
    assert.equal(guard.limiters.ip.policy.description, 'slidingLog(limit=100,windowMs=900000)');
  } finally {
    store.close();
  }
});

for (const kind of BACKENDS) {
  describe(`loginGuard on ${kind}`, () => {
    let backend: Backend;
    let now = T0;
    let guard: LoginGuard;
    let round = 0;
    before(async () => {
      backend = await openBackend(kind, server);
    });
    after(async () => {
      await backend.close();
    });
    /** A guard with its own key names, so tests on one server do not share logs. */
    function fresh(): LoginGuard {
      round++;
      now = T0;
      guard = loginGuard({
        store: backend.store,
        perUsername: { limit: 5, windowMs: MINUTES_15 },
        perIp: { limit: 100, windowMs: MINUTES_15 },
        name: `login-${kind}-${round}`,
        clock: () => now,
        // A loaded machine must not turn a slow reply into the failure policy's answer.
        timeoutMs: 60_000,
      });
      return guard;
    }

    test('the 6th failure for a username within 15 minutes is refused', async () => {
      fresh();
      for (let i = 0; i < 5; i++) {
        assert.equal((await guard.check('alice', `198.51.100.${i}`)).allowed, true);
        const recorded = await guard.failed('alice', `198.51.100.${i}`);
        assert.equal(recorded.allowed, true);
        assert.equal(recorded.username?.remaining, 4 - i);
        now += 1000;
      }
      const sixth = await guard.check('alice', '198.51.100.99');
      assert.equal(sixth.allowed, false);
      assert.deepEqual(sixth.blockedBy, ['username']);
      assert.equal(sixth.reason, undefined);
      assert.equal(sixth.retryAfterMs, T0 + MINUTES_15 - now, 'until the first failure leaves the window');
      assert.equal(sixth.ip?.allowed, true);
      const refused = await guard.failed('alice', '198.51.100.99');
      assert.equal(refused.allowed, false);
      assert.deepEqual(refused.blockedBy, ['username']);
      assert.equal(refused.ip?.remaining, 99, 'the IP still counts the failure');
      now = T0 + MINUTES_15 - 1;
      assert.equal((await guard.check('alice', IP)).allowed, false);
      now = T0 + MINUTES_15;
      const later = await guard.check('alice', IP);
      assert.equal(later.allowed, true, 'the first failure has left the window');
      assert.equal(later.username?.remaining, 1);
    });

    test('the 101st failure from an IP is refused, whatever the username', async () => {
      fresh();
      for (let i = 0; i < 100; i++) {
        const recorded = await guard.failed(`user${i}`, IP);
        assert.equal(recorded.allowed, true, `failure ${i + 1}`);
      }
      const check = await guard.check('someone-new', IP);
      assert.equal(check.allowed, false);
      assert.deepEqual(check.blockedBy, ['ip']);
      assert.equal(check.username?.allowed, true);
      assert.equal(check.retryAfterMs, MINUTES_15);
      const refused = await guard.failed('someone-new', IP);
      assert.equal(refused.allowed, false);
      assert.deepEqual(refused.blockedBy, ['ip']);
      assert.equal(
        (await guard.check('someone-new', '192.0.2.1')).allowed,
        true,
        'another IP is not blocked',
      );
    });

    test("success resets the username's log, not the IP's", async () => {
      fresh();
      for (let i = 0; i < 5; i++) await guard.failed('bob', IP);
      assert.equal((await guard.check('bob', IP)).allowed, false);
      await guard.succeeded('BOB');
      const after = await guard.check('bob', IP);
      assert.equal(after.allowed, true);
      assert.equal(after.username?.remaining, 5);
      assert.equal(after.ip?.remaining, 95);
    });

    test('Alice and alice share one budget', async () => {
      fresh();
      for (const spelling of ['Alice', 'ALICE', 'ａｌｉｃｅ', ' alice', 'alice'])
        await guard.failed(spelling, IP);
      const check = await guard.check('aLiCe', '192.0.2.1');
      assert.equal(check.allowed, false);
      assert.deepEqual(check.blockedBy, ['username']);
      if (backend.redis !== undefined) {
        const name = guard.limiters.username.name;
        assert.equal(Number(await backend.redis.command('ZCARD', `rl:${name}:{alice}`)), 5);
        assert.equal(Number(await backend.redis.command('ZCARD', `rl:${guard.limiters.ip.name}:{${IP}}`)), 5);
      }
    });

    if (kind !== 'memory') {
      test('two single-key scripts, on different slots', async () => {
        fresh();
        const store = backend.store as RedisStore;
        const userKey = store.keyFor(guard.limiters.username.name, 'alice');
        const ipKey = store.keyFor(guard.limiters.ip.name, IP);
        assert.equal(userKey, `rl:login-${kind}-${round}:user:{alice}`);
        assert.notEqual(keySlot(userKey), keySlot(ipKey));
        await guard.check('alice', IP); // loads the script
        const before = store.calls;
        await guard.check('alice', IP);
        assert.equal(store.calls - before, 2);
      });
    }
  });
}

for (const kind of CLIENT_KINDS) {
  test(`with Redis stopped, check refuses (${kind})`, async () => {
    const own = await startRedis();
    const connected = await connect(kind, own.port);
    try {
      const guard = loginGuard({ store: new RedisStore({ client: connected.client }), timeoutMs: 500 });
      // Valkey GLIDE may hold a request through its reconnection attempts (up to its requestTimeout,
      // long in these suites) rather than fail it, and then the guard's own timeout answers for it.
      const failures: readonly string[] =
        kind === 'valkey-glide' ? [ERROR_CODES.STORE, ERROR_CODES.TIMEOUT] : [ERROR_CODES.STORE];
      assert.equal((await guard.failed('carol', IP)).allowed, true);
      assert.equal((await guard.check('carol', IP)).allowed, true);
      await own.kill();
      const check = await guard.check('carol', IP);
      assert.equal(check.allowed, false);
      assert.deepEqual(check.blockedBy, ['username', 'ip']);
      assert.ok(check.reason === 'store-error' || check.reason === 'timeout', String(check.reason));
      assert.ok(failures.includes(String(check.error?.code)), String(check.error?.code));
      assert.equal(check.retryAfterMs, 0);
      assert.equal(check.username, undefined);
      const failed = await guard.failed('carol', IP);
      assert.equal(failed.allowed, false);
      await assert.rejects(
        guard.succeeded('carol'),
        (error: unknown) => error instanceof SluiceError && failures.includes(error.code),
      );
    } finally {
      await connected.close();
      await own.stop();
    }
  });
}

test('bad input rejects instead of deciding', async () => {
  const store = new MemoryStore();
  try {
    const guard = loginGuard({ store });
    const isInvalid = isCode(ERROR_CODES.INVALID_IDENTIFIER);
    await assert.rejects(guard.check('', IP), isInvalid);
    await assert.rejects(guard.check('   ', IP), isInvalid);
    await assert.rejects(guard.check('alice', ''), isInvalid);
    await assert.rejects(guard.failed(42 as never, IP), isInvalid);
    await assert.rejects(guard.succeeded(undefined as never), isInvalid);
    assert.equal(store.size, 0);
  } finally {
    store.close();
  }
});
