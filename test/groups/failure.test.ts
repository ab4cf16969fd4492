// An atomic all() keeps each limiter's failure policy: when the one script cannot be run (server down,
// server paused), every member decides by its own `onStoreError`, within the first limiter's timeout.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  all,
  type CombinedDecision,
  createLimiter,
  type Decision,
  fixedWindow,
  gcra,
  RedisStore,
} from '../../src/index.js';
import { CLIENT_KINDS, connect } from '../helpers/clients.js';
import { watchUnhandledRejections } from '../helpers/load.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

for (const kind of CLIENT_KINDS) {
  describe(`atomic all() when Redis fails, ${kind}`, () => {
    let server: RedisServer;
    before(async () => {
      server = await startRedis();
    });
    after(async () => {
      await server.stop();
    });

    test('server killed: each member decides by its onStoreError, hooks see the error, nothing rejects', async () => {
      const connected = await connect(kind, server.port);
      const store = new RedisStore({ client: connected.client });
      const errors: string[] = [];
      const open = createLimiter({
        store,
        policy: gcra({ limit: 10, periodMs: 60_000 }),
        name: 'open',
        onStoreError: 'allow',
        timeoutMs: 200,
        onError: (_error, context) => errors.push(context.name),
      });
      const closed = createLimiter({
        store,
        policy: fixedWindow({ limit: 10, windowMs: 60_000 }),
        name: 'closed',
        onStoreError: 'deny',
        timeoutMs: 200,
        onError: (_error, context) => errors.push(context.name),
      });
      const lenient = createLimiter({
        store,
        policy: fixedWindow({ limit: 10, windowMs: 60_000 }),
        name: 'lenient',
        onStoreError: 'fallback',
        timeoutMs: 200,
      });
      const strict = all([open, closed]);
      const relaxed = all([open, lenient]);
      // The first call loads the scripts; on a busy machine that may take longer than timeoutMs.
      while ((await open.peek('warm')).reason !== undefined);
      const healthy = await strict.limit('u');
      assert.equal(healthy.allowed, true);
      assert.equal(healthy.reason, undefined);

      const rejections = watchUnhandledRejections();
      await server.kill();
      const down = await Promise.all(Array.from({ length: 20 }, () => strict.limit('u')));
      for (const decision of down) {
        assert.equal(decision.allowed, false, 'the fail-closed member denies');
        assert.deepEqual(decision.deniedBy, ['closed']);
      }
      const reasons = new Set(down.flatMap((d) => d.decisions.map((m: Decision) => m.reason)));
      assert.ok(
        [...reasons].every((r) => r === 'store-error' || r === 'timeout'),
        [...reasons].join(),
      );
      assert.ok(errors.includes('open') && errors.includes('closed'), 'both limiters report the error');

      const relaxedDown = await relaxed.limit('u');
      assert.equal(relaxedDown.allowed, true, 'fail-open and fallback members allow');
      assert.ok(relaxedDown.decisions.some((m: Decision) => m.reason === 'fallback'));

      await server.restart();
      let recovered: CombinedDecision | undefined;
      for (let i = 0; i < 300; i++) {
        recovered = await strict.limit('fresh');
        if (recovered.decisions.every((m: Decision) => m.reason === undefined)) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(
        recovered?.decisions.every((m: Decision) => m.reason === undefined),
        'decisions come from Redis again',
      );
      assert.equal(recovered?.allowed, true);
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(rejections.seen, []);
      rejections.dispose();
      await connected.close();
    });

    test('server paused: the check times out after the first limiter timeoutMs, by each member policy', async () => {
      const connected = await connect(kind, server.port);
      const admin = await connect('ioredis', server.port);
      const store = new RedisStore({ client: connected.client });
      const a = createLimiter({
        store,
        policy: gcra({ limit: 5, periodMs: 60_000 }),
        name: 'pa',
        onStoreError: 'allow',
        timeoutMs: 100,
      });
      const b = createLimiter({
        store,
        policy: gcra({ limit: 5, periodMs: 60_000 }),
        name: 'pb',
        onStoreError: 'allow',
        timeoutMs: 100,
      });
      const both = all([a, b]);
      while ((await a.peek('warm')).reason !== undefined);
      assert.equal((await both.limit('x')).reason, undefined);
      // Held until CLIENT UNPAUSE (a WRITE pause holds scripts, not CLIENT UNPAUSE), however slow the machine.
      await admin.command('CLIENT', 'PAUSE', 600_000, 'WRITE');
      const paused = await both.limit('x');
      assert.equal(paused.allowed, true);
      assert.ok(
        paused.decisions.every((m: Decision) => m.reason === 'timeout'),
        JSON.stringify(paused.decisions),
      );
      await admin.command('CLIENT', 'UNPAUSE').catch(() => {});
      await admin.close();
      await connected.close();
    });
  });
}
