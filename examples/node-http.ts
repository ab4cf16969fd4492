// node:http without a framework: `wrap` puts the limit in front of a request listener.
import { createServer } from 'node:http';
import { Redis } from 'ioredis';
import { createLimiter, fixedWindow, RedisStore } from 'sluice';
import { rateLimit } from 'sluice/node';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

const limiter = createLimiter({
  store: new RedisStore({ client: redis }),
  policy: fixedWindow({ limit: 3, windowMs: 60_000 }),
  name: 'node',
});

// Both the IETF fields and the older RateLimit-Limit/-Remaining/-Reset, for clients that read those.
const limit = rateLimit({ limiter, headers: ['ietf', 'draft-6'] });
const server = createServer(limit.wrap((_request, response) => response.end('ok\n')));
// Or, inside a listener of your own: `if (!(await limit(request, response))) return;`

const port = Number(process.env.PORT ?? 3000);
server.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
