// Groups through the one pipeline: the deny cache answers for an atomic all(), shadow members beside
// enforcing ones, fallback grants given back where they were taken, and every member's hooks.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import {
  all,
  createLimiter,
  type Decision,
  fixedWindow,
  type HookContext,
  MemoryStore,
  RedisStore,
  type Store,
} from '../../src/index.js';
import { BACKENDS, type Backend, openBackend } from '../helpers/backends.js';
import { connect } from '../helpers/clients.js';
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
// Every test counts to its limits in 10-minute windows: none may end meanwhile.
beforeEach(() => clearOfWindowEnd(600_000, 10_000));

/** Script calls a store has made so far: a Redis store counts them; the memory store makes none. */
const callsOf = (store: Store): number => (store instanceof RedisStore ? store.calls : 0);

for (const kind of BACKENDS) {
  describe(`groups on ${kind}`, () => {
    let backend: Backend;
    before(async () => {
      backend = await openBackend(kind, server);
    });
    after(async () => {
      await backend.close();
    });

    test('atomic all(): a remembered denial refuses the group without asking the store', async () => {
      const window = fixedWindow({ limit: 2, windowMs: 600_000 });
      const seen: Array<[string, Decision, HookContext]> = [];
      const hook = (decision: Decision, context: HookContext) => seen.push([context.name, decision, context]);
      const tight = createLimiter({
        store: backend.store,
        policy: window,
        name: unique('tight'),
        denyCache: true,
        timeoutMs: 60_000,
        onDecision: hook,
      });
      const wide = createLimiter({
        store: backend.store,
        policy: fixedWindow({ limit: 10, windowMs: 600_000 }),
        name: unique('wide'),
        timeoutMs: 60_000,
        onDecision: hook,
      });
      const both = all([tight, wide]);
      assert.equal(both.atomic, true);
      assert.equal((await both.limit('k')).allowed, true);
      assert.equal((await both.limit('k')).allowed, true);
      const denied = await both.limit('k');
      assert.deepEqual([denied.allowed, denied.reason, denied.deniedBy], [false, undefined, [tight.name]]);
      const calls = callsOf(backend.store);
      seen.length = 0;
      const cached = await both.limit('k');
      assert.equal(callsOf(backend.store), calls, 'the store was not asked');
      assert.deepEqual([cached.allowed, cached.reason, cached.deniedBy], [false, 'cached', [tight.name]]);
      assert.ok(cached.retryAfterMs > 0 && cached.retryAfterMs <= denied.retryAfterMs);
      const [fromCache, unasked] = cached.decisions;
      assert.deepEqual([fromCache?.allowed, fromCache?.reason], [false, 'cached']);
      assert.deepEqual([unasked?.allowed, unasked?.reason, unasked?.remaining], [true, 'cached', 10]);
      // Only the member that decided (from its cache) tells its hooks; nothing was decided for the other.
      assert.deepEqual(
        seen.map(([name, decision, context]) => [name, decision.allowed, context.source]),
        [[tight.name, false, 'cache']],
      );
      assert.equal(
        (await wide.peek('k')).remaining,
        8,
        'the refused checks took nothing from the other member',
      );
    });

    test('atomic all(): a shadow member is decided beside the enforcing ones, never refusing them', async () => {
      const enforcing = createLimiter({
        store: backend.store,
        policy: fixedWindow({ limit: 5, windowMs: 600_000 }),
        name: unique('enforcing'),
        timeoutMs: 60_000,
      });
      const trial = createLimiter({
        store: backend.store,
        policy: fixedWindow({ limit: 2, windowMs: 600_000 }),
        name: unique('trial'),
        timeoutMs: 60_000,
        enforce: false,
      });
      const both = all([enforcing, trial]);
      const decisions = [];
      for (let i = 0; i < 6; i++) decisions.push(await both.limit('k'));
      assert.deepEqual(
        decisions.map((d) => d.allowed),
        [true, true, true, true, true, false],
      );
      assert.deepEqual(
        decisions.map((d) => d.decisions[1]?.wouldAllow),
        [true, true, false, false, false, false],
        'the shadow member would have refused from the third request on',
      );
      assert.equal((await enforcing.peek('k')).remaining, 0, 'the enforcing member counted its five');
      assert.equal(
        (await trial.peek('k')).remaining,
        0,
        'the shadow member counted what it would have let through',
      );
      assert.equal((await trial.peek('k')).wouldAllow, false);
    });

    test('side by side: each member hears its own decision; a refusal gives back the grants', async () => {
      const contexts: HookContext[] = [];
      const onDecision = (_decision: Decision, context: HookContext) => contexts.push(context);
      const first = createLimiter({
        store: backend.store,
        policy: fixedWindow({ limit: 5, windowMs: 600_000 }),
        name: unique('first'),
        timeoutMs: 60_000,
        onDecision,
      });
      const second = createLimiter({
        store: new MemoryStore(),
        policy: fixedWindow({ limit: 1, windowMs: 600_000 }),
        name: unique('second'),
        onDecision,
      });
      const both = all([first, second]);
      assert.equal(both.atomic, false);
      assert.equal((await both.limit('k')).allowed, true);
      const refused = await both.limit('k');
      assert.deepEqual([refused.allowed, refused.deniedBy], [false, [second.name]]);
      assert.equal(refused.decisions[0]?.remaining, 4, 'the first member shows what it has once given back');
      assert.equal((await first.peek('k')).remaining, 4);
      const heard = contexts.map(
        (c) => `${c.name === first.name ? 'first' : 'second'} ${c.operation} ${c.source}`,
      );
      assert.deepEqual(heard.sort(), [
        'first limit store',
        'first limit store',
        'first peek store',
        'first refund store',
        'second limit store',
        'second limit store',
      ]);
    });
  });
}

test('a fallback grant is given back to the fallback store when another member refuses', async () => {
  // A Redis that has gone: the first member decides by its fallback policy, in process. The store
  // saw its client connected (an outage later is not waited for, unlike a first connection).
  const gone = await startRedis();
  const dead = await connect('ioredis', gone.port);
  const store = new RedisStore({ client: dead.client });
  await store.ready();
  assert.equal(store.untilReady(), undefined);
  await gone.stop();
  try {
    const onRedis = createLimiter({
      store,
      policy: fixedWindow({ limit: 3, windowMs: 600_000 }),
      name: 'redis-side',
      onStoreError: 'fallback',
      timeoutMs: 50,
    });
    const inMemory = createLimiter({
      store: new MemoryStore(),
      policy: fixedWindow({ limit: 1, windowMs: 600_000 }),
      name: 'memory-side',
    });
    const both = all([onRedis, inMemory]);
    const first = await both.limit('k');
    assert.deepEqual(
      [first.allowed, first.decisions[0]?.reason, first.decisions[0]?.remaining],
      [true, 'fallback', 2],
    );
    const refused = await both.limit('k');
    assert.deepEqual([refused.allowed, refused.deniedBy], [false, ['memory-side']]);
    // The fallback took one for the refused request and gave it back: 2 left, as after the first.
    const after = await onRedis.peek('k');
    assert.deepEqual([after.reason, after.remaining], ['fallback', 2]);
  } finally {
    await dead.close();
  }
});
