// all(): a per-user and a per-tenant limit decided together, atomically; a refused request takes nothing from either.
import { Redis } from 'ioredis';
import { all, createLimiter, gcra, RedisStore } from 'sluice';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

const store = new RedisStore({ client: redis });
const perUser = createLimiter({ store, policy: gcra({ limit: 2, periodMs: 60_000 }), name: 'user' });
const perTenant = createLimiter({ store, policy: gcra({ limit: 3, periodMs: 60_000 }), name: 'tenant' });
const both = all([perUser, perTenant]);

// One identifier per limiter, in order; the shared tag puts both keys in one cluster slot, so one script decides.
for (const user of ['u1', 'u1', 'u1', 'u2', 'u2']) {
  const decision = await both.limit([user, 'acme'], { tag: 'tenant:acme' });
  const [forUser, forTenant] = decision.decisions;
  const verdict = decision.allowed ? 'allowed' : `denied by ${decision.deniedBy.join(', ')}`;
  console.log(
    `${user}@acme: ${verdict} (user ${forUser?.remaining} left, tenant ${forTenant?.remaining} left)`,
  );
}
await redis.quit();
