// A budgeted limiter's decisions take the path a plain limiter's take (the worker observes them, it records
// nothing), on a memory and a Redis region store; and its Redis ledger runs through the store's `scripts`.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, beforeEach, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import {
  createLimiter,
  fixedWindow,
  type Limiter,
  MemoryStore,
  type MetricsRecorder,
  RedisStore,
  type Store,
} from '../../src/index.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const DECISIONS = 64;
// An hour's window: the view counts the demand of the current window only, and a minute's window ended
// between a decision and the view's read in about one run in a hundred (.ci/run read "demand 0" once).
const policy = fixedWindow({ limit: 1000, windowMs: 3_600_000 });

/**
 * Reads of `performance.now()` made while `DECISIONS` decisions of `limiter` are taken one after
 * another. The core reads it only off its fast path (to time the store for hooks and recorders):
 * a limiter on the fast path makes as many reads as any other limiter on it.
 */
async function clockReads(limiter: Limiter, identifier: string): Promise<number> {
  await limiter.limit(identifier); // warm-up: the store connected, the scripts loaded
  const now = performance.now;
  let reads = 0;
  performance.now = () => {
    reads++;
    return now.call(performance);
  };
  try {
    for (let i = 0; i < DECISIONS; i++) await limiter.limit(identifier);
  } finally {
    performance.now = now;
  }
  return reads;
}

/** A recorder that counts nothing: attached, it takes a limiter off the fast path. */
const recorder: MetricsRecorder = { register: () => undefined, record: () => {}, health: () => {} };

/**
 * `quiet`: the worker is closed before the count (its observer stays, and returns at once), so that
 * its own timers, which run while decisions wait for Redis, read no clock during it.
 */
async function compare(regionStore: () => Store, global: Store, quiet: boolean): Promise<void> {
  // A deadline no decision comes near: its sweep, which reads the clock, never runs during a count.
  const timeoutMs = 60_000;
  const plain = createLimiter({ store: regionStore(), policy, name: 'plain', timeoutMs });
  const recorded = createLimiter({
    store: regionStore(),
    policy,
    name: 'recorded',
    timeoutMs,
    metrics: recorder,
  });
  const budgeted = createLimiter({
    store: regionStore(),
    policy,
    name: 'budgeted',
    timeoutMs,
    budget: { global, region: 'eu', regions: ['eu', 'us'] },
  });
  try {
    const plainReads = await clockReads(plain, 'a');
    const recordedReads = await clockReads(recorded, 'a');
    await budgeted.limit('a');
    if (quiet) {
      budgeted.close();
      // A ledger call the worker started before it closed ends (and reads the clock) before the count.
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const budgetedReads = await clockReads(budgeted, 'a');
    // The counter tells the paths apart: a recorder's limiter times one decision in 16.
    assert.ok(recordedReads >= plainReads + DECISIONS / 16, `${recordedReads} reads vs ${plainReads}`);
    assert.equal(budgetedReads, plainReads, 'a budgeted limiter on the fast path, as a plain one');
    // And the worker saw the decisions: the identifier is tracked, its demand counted.
    const view = budgeted.budget();
    assert.equal(view.identifiers, 1);
    assert.ok(view.demand >= (quiet ? 1 : DECISIONS), `demand ${view.demand}`);
  } finally {
    budgeted.close();
  }
}

describe('a budgeted limiter decides on the fast path', () => {
  // Each test's decisions, and the view's demand or the ledger's grants read after them, must fall in one hour's
  // window: its end would restart the counts the view and the worker read.
  beforeEach(() => clearOfWindowEnd(3_600_000, 30_000));

  test('on memory stores', async () => {
    await compare(() => new MemoryStore(), new MemoryStore(), false);
  });

  describe('on Redis', () => {
    let server: RedisServer;
    const clients: Redis[] = [];
    before(async () => {
      server = await startRedis();
    });
    after(async () => {
      for (const client of clients) client.disconnect();
      await server.stop();
    });
    const store = (): RedisStore => {
      const client = new Redis({ port: server.port, host: server.host });
      clients.push(client);
      return new RedisStore({ client });
    };

    test('region and global stores on Redis', async () => {
      await compare(store, store(), true);
    });

    test("the ledger runs through the global store's scripts: one script call per ledger call", async () => {
      const global = store();
      await global.ready();
      const limiter = createLimiter({
        store: store(),
        policy,
        name: 'ledger',
        budget: { global, region: 'eu', regions: ['eu', 'us'] },
      });
      try {
        const calls = global.calls;
        let ran = 0;
        const run = global.scripts.run;
        // Counted at the capability: no other way into the store reaches the server.
        global.scripts.run = (...args) => {
          ran++;
          return run(...args);
        };
        // Past the floor: the worker must ask the ledger to grant more.
        for (let i = 0; i < 200; i++) await limiter.limit('busy');
        for (let i = 0; i < 50 && limiter.budget().ledgerCalls === 0; i++) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.ok(ran >= 1, 'the worker asked the ledger');
        assert.equal(global.calls - calls, ran, 'every call the global store sent was a ledger script');
      } finally {
        limiter.close();
      }
    });
  });
});
