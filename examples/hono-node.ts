// Hono on Node (@hono/node-server) with node-redis: a token bucket of 4, refilled 1 per second, per client address.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { createClient } from 'redis';
import { createLimiter, RedisStore, tokenBucket } from 'sluice';
import { rateLimit } from 'sluice/hono';

// disableOfflineQueue: commands fail at once while disconnected; the limiter's failure policy answers.
const redis = createClient({
  url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  disableOfflineQueue: true,
});
await redis.connect();

const limiter = createLimiter({
  store: new RedisStore({ client: redis }),
  policy: tokenBucket({ capacity: 4, refillPerSecond: 1 }),
  name: 'hono',
});

const app = new Hono();
// On @hono/node-server the peer address is read from the Node request it passes as `c.env.incoming`.
app.use('/api/*', rateLimit({ limiter }));
app.get('/api/hello', (c) => c.text('hello\n'));

const port = Number(process.env.PORT ?? 3000);
serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, () => {
  console.log(`listening on http://127.0.0.1:${port}`);
});
