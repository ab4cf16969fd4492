// How the scripts keep state on Redis: expiries set once per window (GCRA: per second) on the server's
// clock (KEEPTTL or INCRBY afterwards), anew on every write with a caller's clock, and few bytes per identifier.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import {
  createLimiter,
  fixedWindow,
  gcra,
  type Policy,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { decodeFixedWindow, decodeTat } from '../../src/stores/redis/stored.js';
import { type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { EXACT, openVariant, type Variant } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const DAY_MS = 86_400_000;

let server: RedisServer;
let variant: Variant;
let subscriber: Redis;
const expireEvents = new Map<string, number>();

before(async () => {
  server = await startRedis({ args: ['--notify-keyspace-events', 'Eg'] });
  variant = await openVariant('ioredis', 'scripts', server.port, 'st');
  subscriber = new Redis({ host: server.host, port: server.port, lazyConnect: true });
  await subscriber.connect();
  subscriber.on('message', (_channel: string, key: string) => {
    expireEvents.set(key, (expireEvents.get(key) ?? 0) + 1);
  });
  await subscriber.subscribe('__keyevent@0__:expire');
  // Day-long windows start at midnight UTC: keep away from the boundary so that every write below
  // falls in one window.
  await clearOfWindowEnd(DAY_MS, 10_000);
});

after(async () => {
  subscriber.disconnect();
  await variant.connected.close();
  await server.stop();
});

/** Waits until the subscriber has seen every event published before a PING sent now returns. */
async function settled(connected: Connected): Promise<void> {
  await connected.command('PUBLISH', '__keyevent@0__:expire', 'sync');
  await connected.command('PING');
  // Polled, not slept: on a loaded machine the event can take long to arrive, and it always does.
  for (let i = 0; i < 2000 && (expireEvents.get('sync') ?? 0) === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.ok(expireEvents.delete('sync'), 'the subscriber saw the events published before');
}

// Each policy with how long its key may live: to the window's end, or the next window's for the sliding window.
const windows: ReadonlyArray<[string, () => Policy, number]> = [
  ['fixedWindow', () => fixedWindow({ limit: 10, windowMs: DAY_MS }), DAY_MS],
  ['slidingWindow', () => slidingWindow({ limit: 10, windowMs: DAY_MS }), 2 * DAY_MS],
];

describe('expiries of the window policies', () => {
  for (const [label, makePolicy, longest] of windows) {
    test(`${label} on the server's clock: the first write of a window sets the expiry, later writes keep it`, async () => {
      const name = `server-${label}`;
      const limiter = createLimiter({ ...EXACT, store: variant.store, policy: makePolicy(), name });
      const key = variant.store.keyFor(name, 'id');
      const before = Number(await variant.connected.command('PEXPIRETIME', key));
      assert.equal(before, -2, 'no key yet');
      const remaining: number[] = [];
      for (let i = 0; i < 5; i++) remaining.push((await limiter.limit('id')).remaining);
      await settled(variant.connected);
      assert.deepEqual(remaining, [9, 8, 7, 6, 5]);
      assert.equal(expireEvents.get(key), 1, 'one expiry set, by the first write');
      const expireTime = Number(await variant.connected.command('PEXPIRETIME', key));
      assert.ok(expireTime > Date.now() && expireTime <= Date.now() + longest, `PEXPIRETIME ${expireTime}`);
    });

    test(`${label} on a caller's clock: every write sets the expiry anew`, async () => {
      const name = `caller-${label}`;
      let now = Math.floor(Date.now() / DAY_MS) * DAY_MS + 1000;
      const limiter = createLimiter({
        ...EXACT,
        store: variant.store,
        policy: makePolicy(),
        name,
        clock: () => now,
      });
      const key = variant.store.keyFor(name, 'id');
      const remaining: number[] = [];
      for (let i = 0; i < 5; i++) {
        remaining.push((await limiter.limit('id')).remaining);
        // A caller's clock may run backwards: the expiry must follow it, not the first write.
        now -= 100;
      }
      await settled(variant.connected);
      assert.deepEqual(remaining, [9, 8, 7, 6, 5]);
      assert.equal(expireEvents.get(key), 5, 'an expiry set by each write');
    });
  }
});

describe('expiries of GCRA and the token bucket', () => {
  test("on the server's clock the key expires at the whole second after its TAT, set once per second; INCRBY moves the TAT within it", async () => {
    const name = 'server-gcra';
    // An interval of 10 ms and a burst of 300 (a tolerance of 3 s).
    const limiter = createLimiter({
      ...EXACT,
      store: variant.store,
      policy: gcra({ limit: 100, periodMs: 1000, burst: 300 }),
      name,
    });
    const key = variant.store.keyFor(name, 'id');
    const seconds = new Set<number>();
    const tats: number[] = [];
    // 248 units: the TAT moves on by 10 ms, then 800 ms at a time, over at least two whole seconds.
    for (const cost of [1, 1, 1, 1, 1, 80, 80, 80, 1, 1]) {
      assert.equal((await limiter.limit('id', { cost })).allowed, true);
      const stored = String(await variant.connected.command('GET', key));
      assert.ok(Number(stored) < -(2 ** 52), `the second form on the server's clock: ${stored}`);
      const tat = decodeTat(stored) ?? Number.NaN;
      const due = Math.ceil(tat / 1000) * 1000;
      seconds.add(due);
      tats.push(tat);
      assert.equal(Number(await variant.connected.command('PEXPIRETIME', key)), due, `TAT ${tat}`);
    }
    await settled(variant.connected);
    assert.ok(seconds.size >= 2, `TATs ${tats.join(', ')}: ${seconds.size} seconds`);
    // One expiry set per second the TAT reached, not one per write.
    assert.equal(expireEvents.get(key), seconds.size);
  });

  test("a TAT of the first form (a caller's clock, or an earlier version) is read, then written in the second", async () => {
    const name = 'first-form';
    const limiter = createLimiter({
      ...EXACT,
      store: variant.store,
      policy: tokenBucket({ capacity: 10, refillPerSecond: 10 }),
      name,
    });
    const key = variant.store.keyFor(name, 'id');
    // Five units in use: the TAT 500 ms ahead, expiring at the TAT.
    const tat = (Date.now() + 500) * 1000;
    await variant.connected.command('SET', key, String(-tat), 'PX', '500');
    const decision = await limiter.limit('id');
    assert.ok(decision.remaining >= 4 && decision.remaining <= 5, `remaining ${decision.remaining}`);
    const stored = String(await variant.connected.command('GET', key));
    assert.ok(Number(stored) < -(2 ** 52), stored);
    const written = decodeTat(stored) ?? Number.NaN;
    assert.equal(written, tat / 1000 + 100);
    assert.equal(
      Number(await variant.connected.command('PEXPIRETIME', key)),
      Math.ceil(written / 1000) * 1000,
    );
  });

  test("on a caller's clock the TAT keeps the first form and the key expires at the TAT", async () => {
    const name = 'caller-gcra';
    const now = Date.now() + 0.25;
    const limiter = createLimiter({
      ...EXACT,
      store: variant.store,
      policy: gcra({ limit: 100, periodMs: 1000, burst: 100 }),
      name,
      clock: () => now,
    });
    const key = variant.store.keyFor(name, 'id');
    await limiter.limit('id', { cost: 50 });
    const stored = String(await variant.connected.command('GET', key));
    assert.equal(stored, String(-(now + 500) * 1000));
    const ttl = Number(await variant.connected.command('PTTL', key));
    assert.ok(ttl > 0 && ttl <= 501, `PTTL ${ttl}`);
  });
});

describe('the two forms of a fixed window count', () => {
  test('a window index and limit that fit are one integer; others are text; each policy reads both', async () => {
    const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'forms');
    try {
      let now = 1_700_000_000_000;
      const clock = () => now;
      const key = store.keyFor('f', 'id');
      // Fits: an index below 2^32 (1 s windows) and a limit below 2^21.
      const packed = createLimiter({
        ...EXACT,
        store,
        policy: fixedWindow({ limit: 5, windowMs: 1000 }),
        name: 'f',
        clock,
      });
      // Does not fit: a limit of 2^21, the same window.
      const text = createLimiter({
        ...EXACT,
        store,
        policy: fixedWindow({ limit: 2_097_152, windowMs: 1000 }),
        name: 'f',
        clock,
      });
      assert.equal((await packed.limit('id', { cost: 2 })).remaining, 3);
      assert.equal(String(await connected.command('GET', key)), String(1_700_000_000 * 2 ** 21 + 2));
      assert.deepEqual(decodeFixedWindow(String(await connected.command('GET', key))), {
        index: 1_700_000_000,
        count: 2,
      });
      assert.equal((await text.limit('id')).remaining, 2_097_152 - 3, 'the text policy read the integer');
      assert.equal(String(await connected.command('GET', key)), '1700000000:3');
      assert.deepEqual(decodeFixedWindow('1700000000:3'), { index: 1_700_000_000, count: 3 });
      assert.equal((await packed.limit('id')).remaining, 1, 'the integer policy read the text');
      assert.equal(String(await connected.command('GET', key)), String(1_700_000_000 * 2 ** 21 + 4));
      assert.equal((await packed.limit('id', { cost: 2 })).allowed, false);
      assert.equal((await packed.peek('id')).remaining, 1, 'a denial took nothing');
      assert.equal((await packed.refund('id', 3)).remaining, 4);
      now += 1000;
      assert.equal((await packed.limit('id')).remaining, 4, 'the next window starts empty');
      // A window of 390 ms has indices above 2^32: text again. (At the start of a window, so the key
      // lives 390 ms of real time: a 1 ms window's key could expire before the GET on a busy machine.)
      now = 4_400_000_000 * 390;
      const fine = createLimiter({
        ...EXACT,
        store,
        policy: fixedWindow({ limit: 5, windowMs: 390 }),
        name: 'g',
        clock,
      });
      assert.equal((await fine.limit('id')).remaining, 4);
      assert.equal(String(await connected.command('GET', store.keyFor('g', 'id'))), '4400000000:1');
    } finally {
      await connected.close();
    }
  });
});

describe('the two forms of a sliding window', () => {
  test("on the server's clock the counts are one integer that INCRBY adds to; text is read and rewritten as it", async () => {
    const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'swforms');
    try {
      const limiter = createLimiter({
        ...EXACT,
        store,
        policy: slidingWindow({ limit: 10, windowMs: DAY_MS }),
        name: 's',
      });
      const key = store.keyFor('s', 'id');
      const index = Math.floor(Date.now() / DAY_MS);
      const packed = (previous: number, current: number) =>
        String((index % 2048) * 2 ** 42 + previous * 2 ** 21 + current);
      assert.equal((await limiter.limit('id', { cost: 2 })).remaining, 8);
      assert.equal((await limiter.limit('id')).remaining, 7);
      assert.equal(String(await connected.command('GET', key)), packed(0, 3));
      assert.equal(await connected.command('OBJECT', 'ENCODING', key), 'int');
      // A key of the text form (an earlier version, or a caller's clock): read, then written as one integer.
      await connected.command('SET', key, `${index}:0:5`, 'KEEPTTL');
      assert.equal((await limiter.limit('id')).remaining, 4);
      assert.equal(String(await connected.command('GET', key)), packed(0, 6));
      // The previous window's count, kept as one integer, weighs in the next window.
      await connected.command(
        'SET',
        key,
        String(((index - 1) % 2048) * 2 ** 42 + 0 * 2 ** 21 + 10),
        'KEEPTTL',
      );
      const decision = await limiter.peek('id');
      const weight = (DAY_MS - (Date.now() % DAY_MS)) / DAY_MS;
      assert.ok(
        Math.abs(decision.remaining - Math.floor(10 - 10 * weight)) <= 1,
        `remaining ${decision.remaining}`,
      );
      assert.equal((await limiter.refund('id', 1)).allowed, true);
    } finally {
      await connected.close();
    }
  });
});

describe('bytes per identifier', () => {
  const policies: ReadonlyArray<[string, () => Policy, string]> = [
    ['fixedWindow', () => fixedWindow({ limit: 1000, windowMs: DAY_MS }), 'int'],
    ['gcra', () => gcra({ limit: 1000, periodMs: DAY_MS }), 'int'],
    ['tokenBucket', () => tokenBucket({ capacity: 1000, refillPerSecond: 0.01 }), 'int'],
  ];
  for (const [label, makePolicy, encoding] of policies) {
    test(`${label}: at most 100 bytes (MEMORY USAGE) for a key like rl:bench:{user:1234}`, async () => {
      const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'rl');
      try {
        const limiter = createLimiter({ ...EXACT, store, policy: makePolicy(), name: 'bench' });
        await limiter.limit('user:1234');
        await limiter.limit('user:1234');
        const key = store.keyFor('bench', 'user:1234');
        assert.equal(key, 'rl:bench:{user:1234}');
        assert.equal(await connected.command('OBJECT', 'ENCODING', key), encoding);
        const bytes = Number(await connected.command('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
        assert.ok(bytes <= 100, `${bytes} bytes`);
        const stored = String(await connected.command('GET', key));
        if (label === 'fixedWindow') {
          assert.equal(decodeFixedWindow(stored)?.count, 2);
        } else {
          // Two units taken: the TAT is two intervals (86.4 s, 100 s) ahead of the server's clock.
          const tat = decodeTat(stored) ?? Number.NaN;
          assert.ok(stored.startsWith('-') && tat > Date.now() && tat < Date.now() + 300_000, stored);
        }
        await connected.command('DEL', key);
      } finally {
        await connected.close();
      }
    });
  }

  test('gcra with an interval that is not whole microseconds keeps its TAT exactly, as a decimal', async () => {
    const connected = await connect('ioredis', server.port);
    try {
      // 7 per 3 000 ms: an interval of 428.571428... ms.
      const policy = gcra({ limit: 7, periodMs: 3000 });
      const now = 1_700_000_000_000.25;
      const limiter = createLimiter({
        ...EXACT,
        store: variant.store,
        policy,
        name: 'decimal',
        clock: () => now,
      });
      const decisions = [];
      for (let i = 0; i < 8; i++) decisions.push((await limiter.limit('id')).allowed);
      assert.deepEqual(decisions, [true, true, true, true, true, true, true, false]);
      const stored = String(await connected.command('GET', variant.store.keyFor('decimal', 'id')));
      let tat = now;
      for (let i = 0; i < 7; i++) tat += 3000 / 7;
      assert.equal(Number(stored), tat, `stored ${stored}`);
      assert.equal(decodeTat(stored), tat);
    } finally {
      await connected.close();
    }
  });
});
