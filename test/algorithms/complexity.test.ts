// Scripts stay O(1) per key (the log O(log N) per unit of cost): counted in commands, then checked in SLOWLOG.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  fixedWindow,
  gcra,
  type Policy,
  RedisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

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

/** Commands run inside scripts, by name, from INFO commandstats (scripts' inner calls are counted). */
async function innerCommands(): Promise<Record<string, number>> {
  const info = String(await admin.command('INFO', 'commandstats'));
  const counts: Record<string, number> = {};
  for (const match of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) {
    const name = match[1] as string;
    if (!/^(evalsha|eval|fcall|info|config|ping|client|hello|select|function)/.test(name)) {
      counts[name] = Number(match[2]);
    }
  }
  return counts;
}

function total(counts: Record<string, number>): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

describe('work per decision does not grow with the state', () => {
  const cases: Array<[Policy, number]> = [
    [fixedWindow({ limit: 1000, windowMs: 60_000 }), 2],
    [slidingWindow({ limit: 1000, windowMs: 60_000 }), 2],
    [tokenBucket({ capacity: 1000, refillPerSecond: 0.001 }), 2],
    [gcra({ limit: 1000, periodMs: 3_600_000 }), 2],
    // The log: newest entry, trim, count, then insert and expire (or one rank lookup when denied).
    [slidingLog({ limit: 1000, windowMs: 60_000 }), 5],
  ];
  for (const [policy, perDecision] of cases) {
    test(`${policy.description}: at most ${perDecision} commands per decision, from the first to the thousandth`, async () => {
      // A minute that ended among the thousand calls would leave the window room for the last one.
      if (policy.algorithm === 'fixedWindow' || policy.algorithm === 'slidingWindow') {
        await clearOfWindowEnd(60_000, 20_000);
      }
      const store = new RedisStore({ client: admin.client, prefix: 'cx', maxBatch: 1 });
      // A busy machine must not turn a slow reply into a timeout decision.
      const limiter = createLimiter({ store, policy, name: policy.algorithm, timeoutMs: 60_000 });
      for (let i = 0; i < 1000; i++) await limiter.limit('id'); // grow the state to its largest
      await admin.command('CONFIG', 'RESETSTAT');
      const first = await limiter.limit('new');
      const afterFirst = total(await innerCommands());
      await admin.command('CONFIG', 'RESETSTAT');
      const later = await limiter.limit('id'); // denied: full state
      const afterLater = total(await innerCommands());
      assert.equal(first.allowed, true);
      assert.equal(later.allowed, false);
      // TIME is one command per call; the rest is per key.
      assert.ok(afterFirst - 1 <= perDecision, `fresh identifier: ${afterFirst} commands`);
      assert.ok(afterLater - 1 <= perDecision, `full identifier: ${afterLater} commands`);
    });
  }
});
