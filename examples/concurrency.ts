// concurrency(): at most 2 exports at once per customer, each holding a lease until released (or until it lapses).
import { Redis } from 'ioredis';
import { concurrency, createLimiter, RedisStore } from 'sluice';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

const store = new RedisStore({ client: redis });
const exports = createLimiter({ store, policy: concurrency({ limit: 2, leaseMs: 30_000 }), name: 'exports' });

const first = await exports.limit('acme');
const second = await exports.limit('acme');
const third = await exports.limit('acme');
console.log(`first: ${first.allowed}, second: ${second.allowed} (${second.remaining} free)`);
// Refused for lack of slots: it took nothing, and the soonest lease lapses in about 30 s.
console.log(`third: ${third.allowed}, retry within ${Math.ceil(third.retryAfterMs / 1000)} s`);

// The work is done: give the slot back. A second release of the same lease changes nothing and says so.
if (first.lease !== undefined) {
  console.log(`released: ${(await exports.release('acme', first.lease)).released}`);
  console.log(`released again: ${(await exports.release('acme', first.lease)).released}`);
}
const fourth = await exports.limit('acme');
// Fencing tokens only grow: what the lease protects refuses work carrying a token older than one it saw.
console.log(
  `fourth: ${fourth.allowed}, token above the first: ${(fourth.lease?.token ?? 0) > (first.lease?.token ?? 0)}`,
);
await redis.quit();
