// The sliding window on the server's clock, where its counts are one integer that INCRBY adds to
// (sliding-window.lua): random calls decided by the script with Redis's TIME agree with the twin run
// at the moments just before and just after each tick, on every field.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createLimiter, type Decision, MemoryStore, type Policy, slidingWindow } from '../../src/index.js';
import { seeded } from '../helpers/random.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene, openVariant, type Variant } from '../helpers/suites.js';
import { runCall, type TwinCall } from '../helpers/twins.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const DAY_MS = 86_400_000;
const STEPS = 400;
const IDENTIFIERS = ['alice', 'bob', 'c{x}', 'ünï'];
// Day-long windows: the previous window's count stays 0 during a run (see the wait for midnight
// below), so every field but the times is a count, and the times only move with the clock.
const POLICIES: ReadonlyArray<() => Policy> = [
  () => slidingWindow({ limit: 20, windowMs: DAY_MS }),
  () => slidingWindow({ limit: 7, windowMs: DAY_MS, maxDebt: 10 }),
];

let server: RedisServer;
let variant: Variant;
before(async () => {
  server = await startRedis();
  variant = await openVariant('ioredis', 'scripts', server.port, 'swclock');
  // Keep away from midnight UTC, where a day window turns.
  await clearOfWindowEnd(DAY_MS, 60_000);
});
after(async () => {
  try {
    await assertHygiene(variant.connected);
  } finally {
    await variant.connected.close();
    await server.stop();
  }
});

function randomCall(random: ReturnType<typeof seeded>, policy: Policy): TwinCall {
  const o = random.next();
  const operation = o < 0.7 ? 'limit' : o < 0.8 ? 'peek' : o < 0.9 ? 'refund' : 'charge';
  const cost = random.next() < 0.7 ? 1 : random.int(1, Math.min(policy.maxCost, policy.limit + 3));
  return { identifier: random.pick(IDENTIFIERS), operation, cost };
}

/** Counts equal; a time field of Redis's between the twin's after the tick and before it. */
function assertBetween(redis: Decision, early: Decision, late: Decision, describe: () => string): void {
  for (const field of ['allowed', 'limit', 'remaining', 'debt', 'cutOff'] as const) {
    assert.equal(redis[field], early[field], `${describe()}: ${field}`);
    assert.equal(late[field], early[field], `${describe()}: ${field} (twin at both ends)`);
  }
  for (const field of ['resetMs', 'retryAfterMs'] as const) {
    assert.ok(
      redis[field] <= early[field] && redis[field] >= late[field],
      `${describe()}: ${field} ${redis[field]} not within [${late[field]}, ${early[field]}]`,
    );
  }
}

describe("sliding window on the server's clock, against the twin", () => {
  POLICIES.forEach((makePolicy, index) => {
    const policy = makePolicy();
    test(`${policy.description}: ${STEPS} random ticks`, async () => {
      const random = seeded(7000 + index);
      const name = `s${index}`;
      const onRedis = createLimiter({ store: variant.store, policy, name, timeoutMs: 60_000 });
      let early = 0;
      let late = 0;
      const atEarly = createLimiter({ store: new MemoryStore(), policy, name, clock: () => early });
      const atLate = createLimiter({ store: new MemoryStore(), policy, name, clock: () => late });
      await variant.connected.command('CONFIG', 'RESETSTAT');
      let increments = 0;
      for (let tick = 0; tick < STEPS; tick++) {
        // Several calls at once go to Redis in one batch (read ahead with MGET), in order.
        const calls: TwinCall[] = [];
        const size = random.next() < 0.3 ? random.int(2, 6) : 1;
        for (let i = 0; i < size; i++) calls.push(randomCall(random, policy));
        early = Date.now();
        const decided = await Promise.all(calls.map((c) => runCall(onRedis, c)));
        // Date.now() rounds down: Redis's clock during the call is below the next whole ms.
        late = Date.now() + 1;
        for (const [i, c] of calls.entries()) {
          const [a, b] = await Promise.all([runCall(atEarly, c), runCall(atLate, c)]);
          assertBetween(
            decided[i] as Decision,
            a,
            b,
            () => `seed ${7000 + index}, tick ${tick}, call ${i} ${c.operation} ${c.cost}`,
          );
          if (c.operation === 'limit' && a.allowed) increments++;
        }
      }
      const key = variant.store.keyFor(name, 'alice');
      const stored = await variant.connected.command('GET', key);
      if (stored !== null) assert.match(String(stored), /^\d+$/, 'the counts are one integer');
      assert.ok(increments >= 20, `${increments} allowed limits`);
      // Requests in a window the key already held went in as INCRBY, not as a SET of the whole value.
      const stats = String(await variant.connected.command('INFO', 'commandstats'));
      const incrby = Number(/cmdstat_incrby:calls=(\d+)/.exec(stats)?.[1] ?? 0);
      assert.ok(incrby >= 10, `${incrby} INCRBY calls`);
    });
  });
});
