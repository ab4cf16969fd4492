// A web-standard fetch handler (Request in, Response out), served here on Node by @hono/node-server.
// The same `handler` runs on Deno (`Deno.serve(handler)`) or Bun (`export default { fetch: handler }`).
import { serve } from '@hono/node-server';
import { Redis } from 'ioredis';
import { createLimiter, RedisStore, slidingLog } from 'sluice';
import { headerKey, rateLimit } from 'sluice/fetch';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

// Exact at every instant: at most 3 requests in any 10 seconds per API key.
const limiter = createLimiter({
  store: new RedisStore({ client: redis }),
  policy: slidingLog({ limit: 3, windowMs: 10_000 }),
  name: 'fetch',
});

const limit = rateLimit({ limiter, key: headerKey('x-api-key'), missingKey: 'deny' });
export const handler = limit.wrap(async (request: Request) =>
  Response.json({ path: new URL(request.url).pathname }),
);

// A Request carries no peer address; to key by it, pass what the runtime gives, e.g. on this server:
// rateLimit({ limiter, remoteAddress: (_request, env: HttpBindings) => env.incoming.socket.remoteAddress })
const port = Number(process.env.PORT ?? 3000);
serve({ fetch: handler, port, hostname: '127.0.0.1' }, () => {
  console.log(`listening on http://127.0.0.1:${port}`);
});
