// Express + Redis: every client address may make 5 requests a minute, counted in Redis.
import express from 'express';
import { Redis } from 'ioredis';
import { createLimiter, RedisStore, slidingWindow } from 'sluice';
import { rateLimit } from 'sluice/express';

// Fail fast while Redis is down (no offline queue, no resend): the limiter decides at once instead.
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

const limiter = createLimiter({
  store: new RedisStore({ client: redis }),
  policy: slidingWindow({ limit: 5, windowMs: 60_000 }),
  name: 'api',
});

const app = express();
// Keyed by the socket's peer address. No proxy is trusted until you say which (`clientIp({ trustProxy })`).
app.use(rateLimit({ limiter }));
app.get('/', (_req, res) => {
  res.send('hello\n');
});

const port = Number(process.env.PORT ?? 3000);
app.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
