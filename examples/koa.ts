// Koa + Redis: 5 requests a minute per client address, the decision in ctx.state for the handler.
import { Redis } from 'ioredis';
import Koa from 'koa';
import { createLimiter, fixedWindow, RedisStore } from 'sluice';
import { rateLimit } from 'sluice/koa';

// Fail fast while Redis is down (no offline queue, no resend): the limiter decides at once instead.
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

const limiter = createLimiter({
  store: new RedisStore({ client: redis }),
  policy: fixedWindow({ limit: 5, windowMs: 60_000 }),
  name: 'koa',
});

const app = new Koa();
// Keyed by the socket's peer address: Koa's `app.proxy` is not consulted (see clientIp({ trustProxy })).
app.use(rateLimit({ limiter }));
app.use((ctx) => {
  // Typed by importing sluice/koa; undefined when no limiter decided the request.
  ctx.body = { remaining: ctx.state.rateLimit?.remaining };
});

const port = Number(process.env.PORT ?? 3000);
app.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
