// wait(): a slot further than maxWaitMs takes nothing and comes back at once; an aborted wait gives its
// slot back (the next call scheduled moves up by one slot); the windows poll; bad options are refused.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { askSlot, limiterPipeline, type Pipeline } from '../../src/core/index.js';
import {
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  gcra,
  type Limiter,
  type Policy,
  type Store,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { BACKENDS, type Backend, openBackend } from '../helpers/backends.js';
import { isCode } from '../helpers/errors.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { EXACT, unique } from '../helpers/suites.js';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/** 10 per second, one at a time: slots 100 ms apart. */
const EVERY_100_MS = (): Policy => gcra({ limit: 10, periodMs: 1000, burst: 1 });

function limiterOn(store: Store, policy: Policy, clock?: () => number): Limiter {
  return createLimiter({ store, policy, name: unique('wait'), ...EXACT, ...(clock ? { clock } : {}) });
}

/** How long the next slot is away, asked of the store without taking it (a longest wait of -1 only reads). */
async function nextSlotMs(limiter: Limiter, identifier: string): Promise<number> {
  const slot = await askSlot(limiterPipeline(limiter) as Pipeline, identifier, 1, undefined, -1);
  return slot.decision.waitMs;
}

/** Resolves once `condition` holds, looking every few ms (a store's answer arriving). */
async function until(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 5));
}

for (const kind of BACKENDS.slice(0, 2)) {
  describe(`wait() on ${kind}`, () => {
    let backend: Backend;
    before(async () => {
      backend = await openBackend(kind, server);
    });
    after(async () => {
      await backend.close();
    });

    for (const policy of [EVERY_100_MS, () => tokenBucket({ capacity: 1, refillPerSecond: 10 })]) {
      test(`${policy().algorithm}: a slot further away than maxWaitMs takes nothing and is refused at once`, async () => {
        const now = 1_700_000_000_000;
        const limiter = limiterOn(backend.store, policy(), () => now);
        assert.equal((await limiter.wait('a')).allowed, true, 'the first slot is now');
        assert.equal(await nextSlotMs(limiter, 'a'), 100);
        const refused = await limiter.wait('a', { maxWaitMs: 40 });
        assert.equal(refused.allowed, false);
        assert.equal(refused.retryAfterMs, 60, 'the same wait fits 60 ms later');
        assert.equal(await nextSlotMs(limiter, 'a'), 100, 'the refused wait took nothing');
      });
    }

    test('a granted wait answers the reset of the state it returns: a window decided at the end, a slot reserved at the start', async () => {
      // Each limiter's clock is moved by the test. 1 unit per second, taken at +500 ms into a window;
      // the wait asks at +500 (refused, or a slot 1000 ms on), and the clock is at +2000 when it asks
      // again or its slot comes: what it answers must be what the state says at +2000. (The Redis
      // keys expire in real time: half a window keeps the first grant's key for the wait's first ask.)
      const cases: Array<[string, Policy, number]> = [
        // The window [2000, 3000) was opened by the grant.
        ['fixedWindow', fixedWindow({ limit: 1, windowMs: 1000 }) as Policy, 1000],
        // The grant counts in [2000, 3000) and, weighted, in the next window, until 4000.
        ['slidingWindow', slidingWindow({ limit: 1, windowMs: 1000 }) as Policy, 2000],
        // The entry written at +2000 leaves the log at +3000.
        ['slidingLog', slidingLog({ limit: 1, windowMs: 1000 }) as Policy, 1000],
        // The slot at +1500 was reserved at +500: the TAT is +2500, 500 from +2000.
        ['gcra', gcra({ limit: 1, periodMs: 1000, burst: 1 }) as Policy, 500],
        ['tokenBucket', tokenBucket({ capacity: 1, refillPerSecond: 1 }) as Policy, 500],
      ];
      for (const [label, policy, resetMs] of cases) {
        const start = 1_700_000_000_000;
        const time = { now: start + 500 };
        const limiter = limiterOn(backend.store, policy, () => time.now);
        assert.equal((await limiter.limit('r')).allowed, true);
        const waiting = limiter.wait('r', { maxWaitMs: 5000 });
        // wait() read the clock for its first ask before it returned.
        time.now = start + 2000;
        const granted = await waiting;
        assert.equal(granted.allowed, true, label);
        assert.ok(granted.waitedMs > 0, `${label}: it waited`);
        assert.equal(granted.resetMs, resetMs, `${label}: the reset at +2000`);
      }
    });

    test('an aborted wait rejects with its reason and gives its slot back: the next call moves up one slot', async () => {
      const now = 1_700_000_000_000;
      const limiter = limiterOn(backend.store, EVERY_100_MS(), () => now);
      await limiter.wait('b');
      const second = new AbortController();
      const waiting = limiter.wait('b', { signal: second.signal });
      const third = limiter.wait('b');
      // Both slots taken: the next is 300 ms away (its clock stands still).
      await until(async () => (await nextSlotMs(limiter, 'b')) === 300);
      second.abort(new Error('the user left'));
      await assert.rejects(waiting, /the user left/);
      assert.equal(await nextSlotMs(limiter, 'b'), 200, 'one slot earlier than before the abort');
      assert.equal((await third).allowed, true, 'the call behind it still goes');
    });

    test('a signal aborted before the call rejects with its reason, and nothing is asked', async () => {
      const limiter = limiterOn(backend.store, EVERY_100_MS());
      const controller = new AbortController();
      controller.abort(new Error('too late'));
      await assert.rejects(limiter.wait('c', { signal: controller.signal }), /too late/);
      assert.equal(await nextSlotMs(limiter, 'c'), 0, 'no slot was taken');
    });

    test('the windows are asked again after their retryAfterMs, within maxWaitMs', async () => {
      // The third wait ends as a window begins; the last two calls must land in that same window, which
      // lasts long enough for a busy machine's pause between them.
      const limiter = limiterOn(backend.store, fixedWindow({ limit: 2, windowMs: 600 }));
      const decisions = await Promise.all([1, 2, 3].map(() => limiter.wait('d')));
      assert.deepEqual(
        decisions.map((decision) => decision.allowed),
        [true, true, true],
      );
      await limiter.limit('d');
      const refused = await limiter.wait('d', { maxWaitMs: 0 });
      assert.equal(refused.allowed, false, 'a window full for longer than maxWaitMs refuses at once');
    });
  });
}

describe('wait() options', () => {
  const limiter = createLimiter({
    store: {
      kind: 'none',
      decide: () => Promise.reject(new Error('never asked')),
      reset: async () => {},
      keyFor: () => 'k',
    },
    policy: EVERY_100_MS(),
    name: 'options',
  });
  for (const [options, message] of [
    [{ maxWaitMs: -1 }, /`maxWaitMs`.*from 0 to 3600000/],
    [{ maxWaitMs: 3_600_001 }, /`maxWaitMs`/],
    [{ maxWaitMs: 1.5 }, /`maxWaitMs`/],
    [{ signal: 'stop' }, /`signal`.*AbortSignal/],
    [{ maxWait: 10 }, /Unknown option `wait\.maxWait`/],
  ] as const) {
    test(`${JSON.stringify(options)} is refused with ERR_SLUICE_INVALID_OPTION, nothing asked`, async () => {
      await assert.rejects(limiter.wait('x', options as never), isCode(ERROR_CODES.INVALID_OPTION, message));
    });
  }
  test('a cost beyond what the policy ever grants is refused as for limit()', async () => {
    await assert.rejects(limiter.wait('x', { cost: 2 }), isCode(ERROR_CODES.COST_EXCEEDS_LIMIT));
  });
});

describe('the scripts and the operations table', () => {
  test("single.lua reads each operation's shape from its request, not from a table of its own", async () => {
    const { LUA_SOURCES } = await import('../../src/stores/redis/lua.generated.js');
    const { OPERATIONS } = await import('../../src/operations.js');
    // One table of operations (src/operations/): the scripts learn a shape from ARGV[1].
    assert.doesNotMatch(LUA_SOURCES.single, /local (OPERANDS|FIELDS) = \{/);
    assert.match(LUA_SOURCES.single, /string\.match\(ARGV\[1\], '\^\(%d\+\):\?\(%d\*\):\?\(%d\*\)\$'\)/);
    for (const entry of Object.values(OPERATIONS)) {
      if (entry.code === undefined) continue;
      assert.equal(
        entry.wire,
        `${entry.code}:${entry.operands}:${entry.fields}`,
        `shape of op '${entry.code}'`,
      );
    }
  });
});

describe('a pause on Redis', () => {
  test("lives in the identifier's own key with the arrival time, and the key expires", async () => {
    const backend = await openBackend('ioredis', server);
    try {
      const limiter = limiterOn(backend.store, EVERY_100_MS());
      const pipeline = limiterPipeline(limiter) as Pipeline;
      const paused = await askSlot(pipeline, 'p', 1, undefined, -1, 2000);
      // Whole ms, rounded up: the pause ends on the first whole ms at least 2000 ms from now.
      assert.ok([2000, 2001].includes(paused.decision.pausedMs), `${paused.decision.pausedMs} ms`);
      const key = limiter.store.keyFor(limiter.name, 'p');
      const value = String(await backend.redis?.command('GET', key));
      assert.match(value, /^\S+ \d+ 200[01]$/, 'the TAT, when the pause ends, and the shift');
      const ttl = Number(await backend.redis?.command('PTTL', key));
      assert.ok(ttl > 1000 && ttl <= 2001, `expires with the TAT, when the pause ends: ${ttl} ms`);
      assert.deepEqual(await backend.redis?.command('KEYS', `${key}*`), [key], 'no other key');
      // A slot asked during the pause comes after it; limit() is refused until then.
      const slot = await askSlot(pipeline, 'p', 1, undefined, 60_000);
      assert.ok(slot.decision.waitMs >= 1900, `${slot.decision.waitMs} ms`);
      assert.equal((await limiter.limit('p')).allowed, false);
    } finally {
      await backend.close();
    }
  });
});
