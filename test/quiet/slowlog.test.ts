// No limiter script in SLOWLOG after a worst-case workload. SLOWLOG measures wall time on the server,
// so this file runs last and alone (test/quiet/): the other suites' load would stall the server it watches.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  gcra,
  RedisStore,
  SLIDING_LOG_MAX_LIMIT,
  slidingLog,
  slidingWindow,
} from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { scriptsInSlowlog } from '../helpers/suites.js';

let server: RedisServer;
let admin: Connected;
before(async () => {
  server = await startRedis();
  admin = await connect('ioredis', server.port);
});
after(async () => {
  await admin.close();
  await server.stop();
});

describe('SLOWLOG', () => {
  test('holds no limiter script after a worst-case workload (confirmed over repeated runs)', async () => {
    const store = new RedisStore({ client: admin.client, prefix: 'slow' });
    const limiters = [
      createLimiter({
        store,
        policy: slidingLog({ limit: SLIDING_LOG_MAX_LIMIT, windowMs: 60_000 }),
        name: 'log',
        timeoutMs: 60_000,
      }),
      createLimiter({
        store,
        policy: slidingWindow({ limit: 100, windowMs: 60_000 }),
        name: 'sw',
        timeoutMs: 60_000,
      }),
      createLimiter({ store, policy: gcra({ limit: 100, periodMs: 60_000 }), name: 'g', timeoutMs: 60_000 }),
    ];
    const workload = async (round: number) => {
      // Logs at the ceiling with the largest cost, and full coalesced batches of 128 keys.
      const log = limiters[0] as (typeof limiters)[0];
      for (let i = 0; i < 5; i++) {
        await log.limit(`full-${round}-${i}`, { cost: SLIDING_LOG_MAX_LIMIT });
        await log.limit(`full-${round}-${i}`);
        await log.refund(`full-${round}-${i}`, SLIDING_LOG_MAX_LIMIT);
      }
      for (const limiter of limiters) {
        await Promise.all(Array.from({ length: 512 }, (_, i) => limiter.limit(`k${i % 300}`)));
      }
    };
    // SLOWLOG measures wall time, and a shared machine can stall any command for 10 ms. A script that
    // is really slow is slow every time: fail only if scripts show up in every one of three runs.
    const seen: unknown[][] = [];
    for (let round = 0; round < 3; round++) {
      await admin.command('SLOWLOG', 'RESET');
      await workload(round);
      const found = await scriptsInSlowlog(admin);
      seen.push(found);
      if (found.length === 0) break;
    }
    assert.ok(
      seen.some((found) => found.length === 0),
      `limiter scripts in SLOWLOG: ${JSON.stringify(seen)}`,
    );
  });
});
