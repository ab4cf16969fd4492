// A login endpoint guarded against guessing: at most 5 failures per username and 100 per address in 15 minutes.
import express from 'express';
import { Redis } from 'ioredis';
import { loginGuard, RedisStore } from 'sluice';
import { clientIp, nodeRequestView } from 'sluice/http';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
await redis.connect();

const guard = loginGuard({
  store: new RedisStore({ client: redis }),
  perUsername: { limit: 5, windowMs: 15 * 60_000 },
  perIp: { limit: 100, windowMs: 15 * 60_000 },
});

// The key clientIp() gives: the peer address (IPv6 grouped by /56), proxies trusted only if you say so.
const addressOf = clientIp();
const PASSWORDS = new Map([['alice', 'correct horse battery staple']]); // stands in for your user store

const app = express();
app.use(express.json());
app.post('/login', async (req, res) => {
  const { username, password } = (req.body ?? {}) as { username?: unknown; password?: unknown };
  const ip = addressOf.extract(nodeRequestView(req));
  if (typeof username !== 'string' || typeof password !== 'string' || ip === undefined) {
    res.status(400).end();
    return;
  }
  const verdict = await guard.check(username, ip);
  if (!verdict.allowed) {
    // `reason` is set when the store could not be asked: an outage (503), not the client's doing (429).
    if (verdict.retryAfterMs > 0) res.set('Retry-After', String(Math.ceil(verdict.retryAfterMs / 1000)));
    res.status(verdict.reason === undefined ? 429 : 503).end();
    return;
  }
  if (PASSWORDS.get(username) === password) {
    await guard.succeeded(username); // forgets the username's failures
    res.status(204).end();
    return;
  }
  const recorded = await guard.failed(username, ip);
  res.status(401).json({ attemptsLeft: recorded.username?.remaining ?? 0 });
});

const port = Number(process.env.PORT ?? 3000);
app.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
