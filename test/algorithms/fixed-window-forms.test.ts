// The fixed window keeps index × 2^21 + count as one integer only while the count fits below 2^21,
// whatever the limit of the call that writes it: a refund under a lowered per-call limit must not
// pack a larger count into the window index.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createLimiter, type Decision, fixedWindow, type Limiter, MemoryStore } from '../../src/index.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { openVariant } from '../helpers/suites.js';

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

const NOW = 1_700_000_000_000;
const LARGE = 2_500_000;

async function sequence(limiter: Limiter): Promise<Decision[]> {
  return [
    await limiter.limit('id', { cost: LARGE }),
    await limiter.refund('id', 1, { limit: 1000 }),
    await limiter.peek('id'),
    await limiter.limit('id', { cost: 1000 }),
  ];
}

test('a refund under a lowered limit keeps a count above 2^21 exactly, on Redis and in memory', async () => {
  const { connected, store } = await openVariant('ioredis', 'scripts', server.port, 'forms-refund');
  try {
    const options = {
      policy: fixedWindow({ limit: 3_000_000, windowMs: 60_000 }),
      name: 'f',
      clock: () => NOW,
      timeoutMs: 60_000,
    };
    const fromRedis = await sequence(createLimiter({ ...options, store }));
    const fromMemory = await sequence(createLimiter({ ...options, store: new MemoryStore() }));
    assert.deepEqual(fromRedis, fromMemory);
    assert.equal(fromRedis[2]?.remaining, 3_000_000 - (LARGE - 1));
    assert.equal(
      String(await connected.command('GET', store.keyFor('f', 'id'))),
      `${Math.floor(NOW / 60_000)}:${LARGE - 1 + 1000}`,
    );
  } finally {
    await connected.close();
  }
});
