// A token bucket budget's ledger and a region that does not hold its floor (back from a lapse and waiting for it, or
// not yet renewed): that region decides on its leases alone, so the ledger leases it its demand's whole capacity,
// not that less its floor. Measured on Redis (ledger-bucket.lua) and in memory (its twin), on one clock: a demand of
// 20 units per half lease wants 25 units of capacity (a quarter of headroom); with a floor of 10 held, the lease is 15;
// without it, 25. Leases still never pass the pool.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ledgerIn } from '../../src/budget/ledger.js';
import { MemoryStore } from '../../src/index.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { assertHygiene, openVariant, type Variant } from '../helpers/suites.js';

let server: RedisServer;
let variant: Variant;
before(async () => {
  server = await startRedis();
  variant = await openVariant('ioredis', 'scripts', server.port, 'lf');
});
after(async () => {
  await assertHygiene(variant.connected);
  await variant.connected.close();
  await server.stop();
});

/** Three regions; leases of 2 s (half-lease periods of 1 s), a bucket that fills in 1 s, floors of 10. */
const SETTINGS = { region: 0, regions: 3, leaseMs: 2000, pool: 90, tau: 1000, floor: 10 } as const;
const NOW = 1_800_000_000_000;

describe('the bucket ledger and a region without its floor', () => {
  for (const [label, open] of [
    ['Redis', () => ledgerIn(variant.store)],
    ['memory', () => ledgerIn(new MemoryStore({ prefix: 'lf' }))],
  ] as const) {
    test(`${label}: leased its demand's whole capacity without its floor (25), that less the floor with it (15)`, async () => {
      const ledger = open();
      const now = NOW + Math.floor(Date.now() % 1000);
      const lease = async (identifier: string, holdsFloor: boolean | undefined) => {
        const key = ledger.keyFor('api', `${identifier}-${label}-${Date.now()}`);
        const [reply] = await ledger.bucket([key], { ...SETTINGS, holdsFloor }, [20], now);
        return reply;
      };
      const held = await lease('held', true);
      const unsaid = await lease('unsaid', undefined);
      const waiting = await lease('waiting', false);
      assert.deepEqual(
        [held?.lease, unsaid?.lease, waiting?.lease],
        [15, 15, 25],
        'leases: holding its floor, not saying, waiting for it',
      );
      // Still within the pool, and no more than its demand wants: a large demand gets the pool at most.
      const greedy = await lease('greedy', false);
      assert.ok((greedy?.leased ?? 0) <= SETTINGS.pool);
      const [huge] = await ledger.bucket(
        [ledger.keyFor('api', `huge-${label}-${Date.now()}`)],
        { ...SETTINGS, holdsFloor: false },
        [1000],
        now,
      );
      assert.equal(huge?.lease, SETTINGS.pool);
    });
  }
});
