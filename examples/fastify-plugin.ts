// Fastify: the limit lives in a plugin, so it covers the routes that plugin registers (/api/...), keyed by API key.
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { createLimiter, gcra, RedisStore } from 'sluice';
import { headerKey, rateLimit } from 'sluice/fastify';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

// 10 a minute, evenly spaced, with bursts of up to 3.
const limiter = createLimiter({
  store: new RedisStore({ client: redis }),
  policy: gcra({ limit: 10, periodMs: 60_000, burst: 3 }),
  name: 'api',
});

const app = Fastify();
app.register(
  async (api) => {
    // A request without the header gets 400: an unauthenticated client must not share someone's quota.
    api.addHook('onRequest', rateLimit({ limiter, key: headerKey('x-api-key'), missingKey: 'deny' }));
    api.get('/items', async () => ({ items: ['a', 'b'] }));
  },
  { prefix: '/api' },
);
app.get('/health', async () => 'ok\n'); // outside the plugin: not limited

const port = Number(process.env.PORT ?? 3000);
await app.listen({ port, host: '127.0.0.1' });
console.log(`listening on http://127.0.0.1:${port}`);
