// What sluice's scripts cost the server: after ready() and one call of every kind on every algorithm,
// the scripts (or the function library) hold at most 170,000 bytes, one script per algorithm file.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import {
  all,
  concurrency,
  createLimiter,
  fixedWindow,
  gcra,
  type Limiter,
  RedisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { LIBRARY_NAME, SCRIPTS } from '../../src/stores/redis/scripts.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const HOUR = 3_600_000;
/** The most bytes sluice's scripts may hold on a server (INFO memory), in either mode. */
const MAX_SCRIPT_BYTES = 170_000;
/**
 * One decision script per algorithm file (fixed window, sliding log, sliding window, GCRA and the
 * token bucket, concurrency, and a budget's window and bucket), the combined one, the two that
 * write stored entries, a budget's two ledgers and its regions' floor leases.
 */
const SCRIPT_COUNT = 13;

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/** INFO memory's numeric fields. */
async function memory(admin: Redis): Promise<Record<string, number>> {
  const info = await admin.info('memory');
  return Object.fromEntries(
    [...info.matchAll(/^(\w+):(\d+)\r?$/gm)].map((match) => [match[1] as string, Number(match[2])]),
  );
}

/** One limiter per algorithm, each taking stored limits and denials (the decisions then read them). */
function limiters(store: RedisStore): Limiter[] {
  const policies = [
    fixedWindow({ limit: 10, windowMs: HOUR }),
    slidingLog({ limit: 10, windowMs: HOUR }),
    slidingWindow({ limit: 10, windowMs: HOUR }),
    gcra({ limit: 10, periodMs: HOUR }),
    tokenBucket({ capacity: 10, refillPerSecond: 1 }),
    concurrency({ limit: 10, leaseMs: HOUR }),
  ];
  return policies.map((policy, i) =>
    createLimiter({ store, policy, name: `memory-${i}`, overrides: true, timeoutMs: 10_000 }),
  );
}

/** A call of every kind each policy takes: limit, peek, a stored limit, a denial, a charge, a wait, a lease. */
async function exercise(limiter: Limiter): Promise<void> {
  // A concurrency policy takes no stored limit.
  const leases = limiter.policy.leaseMs !== undefined;
  if (!leases) await limiter.setLimit('limited', 5);
  await limiter.deny('denied', { forMs: HOUR });
  assert.equal((await limiter.limit('limited')).remaining, leases ? 9 : 4, limiter.policy.description);
  assert.equal((await limiter.limit('denied')).allowed, false, limiter.policy.description);
  const granted = await limiter.limit('free');
  assert.equal(granted.allowed, true, limiter.policy.description);
  await limiter.peek('free');
  if (granted.lease !== undefined) {
    await limiter.extend('free', granted.lease, HOUR);
    await limiter.release('free', granted.lease);
  } else {
    await limiter.refund('free');
    await limiter.charge('charged', 2);
  }
  if (limiter.policy.schedules === true) await limiter.wait('waited');
}

describe('the scripts on the server', () => {
  for (const mode of ['scripts', 'functions'] as const) {
    test(`${mode}: after ready() and a call of every kind, at most ${MAX_SCRIPT_BYTES} bytes in ${SCRIPT_COUNT} scripts`, async () => {
      const admin = new Redis({ port: server.port });
      const client = new Redis({ port: server.port, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
      try {
        await admin.call('FLUSHALL');
        await admin.call('SCRIPT', 'FLUSH');
        await admin.call('FUNCTION', 'FLUSH');
        const store = new RedisStore({ client, mode });
        const each = limiters(store);
        await store.ready();
        const ready = await memory(admin);
        for (const limiter of each) await exercise(limiter);
        // An atomic group (the combined script), reading stored entries too.
        const group = await all(each.slice(0, 5), { atomic: true }).limit(
          ['limited', 'limited', 'limited', 'limited', 'limited'],
          { tag: 'g' },
        );
        assert.equal(group.allowed, true);
        // The calls ran the scripts ready() loaded: nothing more was loaded.
        const used = await memory(admin);
        for (const field of ['number_of_cached_scripts', 'number_of_functions', 'number_of_libraries']) {
          assert.equal(used[field], ready[field], `${field} after the calls`);
        }
        if (mode === 'scripts') {
          assert.equal(Object.keys(SCRIPTS).length, SCRIPT_COUNT);
          assert.equal(used.number_of_cached_scripts, SCRIPT_COUNT, 'scripts cached');
          const shas = Object.values(SCRIPTS).map((script) => script.sha);
          assert.deepEqual(
            await admin.call('SCRIPT', 'EXISTS', ...shas),
            shas.map(() => 1),
          );
          assert.ok(
            (used.used_memory_scripts_eval as number) <= MAX_SCRIPT_BYTES,
            `used_memory_scripts_eval ${used.used_memory_scripts_eval} <= ${MAX_SCRIPT_BYTES}`,
          );
          assert.equal(used.number_of_functions, 0);
        } else {
          assert.equal(used.number_of_functions, SCRIPT_COUNT, 'functions');
          assert.equal(used.number_of_libraries ?? 1, 1);
          const listed = JSON.stringify(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY_NAME));
          assert.ok(listed.includes(LIBRARY_NAME), `${LIBRARY_NAME} listed`);
          assert.ok(
            (used.used_memory_functions as number) <= MAX_SCRIPT_BYTES,
            `used_memory_functions ${used.used_memory_functions} <= ${MAX_SCRIPT_BYTES}`,
          );
          // Decisions in functions mode send no script of their own (EVAL only after repeated flushes).
          assert.equal(used.number_of_cached_scripts, 0);
        }
      } finally {
        client.disconnect();
        admin.disconnect();
      }
    });
  }
});
