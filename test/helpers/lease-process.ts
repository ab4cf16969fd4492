// A child process for the multi-process lease suites, told its role by its first message: an HTTP server whose
// handler holds each request and counts how many run at once (in Redis, which orders every count); a holder of
// leases that waits to be killed; or a loop of acquisitions that reports each fencing token with when it was asked.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { rateLimit } from '../../src/http/adapters/node.js';
import { headerKey } from '../../src/http/client-key.js';
import {
  all,
  concurrency,
  createLimiter,
  fixedWindow,
  type Lease,
  type Limiter,
  RedisStore,
} from '../../src/index.js';

/**
 * The rate beside the slots counts in one window for the whole run: a week-long window, so that the
 * clock-aligned window does not roll over between the burst and the test's look at it.
 */
export const RATE_WINDOW_MS = 7 * 86_400_000;

export type LeaseRole =
  | {
      readonly role: 'serve';
      readonly limit: number;
      readonly holdMs: number;
      /** A rate limit of this many per minute beside the concurrency limit, in one all(). */
      readonly beside?: number;
    }
  | { readonly role: 'hold'; readonly limit: number; readonly leaseMs: number; readonly count: number }
  | { readonly role: 'tokens'; readonly limit: number; readonly loops: number; readonly each: number };

/** One acquisition of the `tokens` role: its token, and when it was asked and answered (ms since the epoch). */
export interface Stamped {
  readonly token: number;
  readonly sentAt: number;
  readonly answeredAt: number;
}

/** The key counting requests in the handler right now, per identifier. */
export const IN_FLIGHT_KEY = 'test:in-flight';

const now = (): number => performance.timeOrigin + performance.now();

async function limiters(
  port: number,
  role: LeaseRole,
): Promise<{ slots: Limiter; rate: Limiter; redis: Redis }> {
  const redis = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
  });
  await redis.connect();
  const store = new RedisStore({ client: redis });
  // Fail closed, and wait long: a store failure must never let a request through holding nothing.
  const exact = { timeoutMs: 60_000, onStoreError: 'deny' } as const;
  const leaseMs = role.role === 'hold' ? role.leaseMs : 30_000;
  const { limit } = role;
  const slots = createLimiter({ store, policy: concurrency({ limit, leaseMs }), name: 'slots', ...exact });
  const perWindow = role.role === 'serve' ? (role.beside ?? 1) : 1;
  const rate = createLimiter({
    store,
    policy: fixedWindow({ limit: perWindow, windowMs: RATE_WINDOW_MS }),
    name: 'rate',
    ...exact,
  });
  return { slots, rate, redis };
}

/** Serves `/`: the request holds a slot, counts itself in Redis while it runs `holdMs`, and answers. */
async function serve(
  role: Extract<LeaseRole, { role: 'serve' }>,
  slots: Limiter,
  rate: Limiter,
  redis: Redis,
) {
  const counter = redis.duplicate({ enableOfflineQueue: true });
  let most = 0;
  const limit = rateLimit({
    limiter: role.beside === undefined ? slots : all([rate, slots]),
    key: headerKey('x-client'),
  });
  const server = createServer(
    limit.wrap(async (request, response) => {
      const key = `${IN_FLIGHT_KEY}:${request.headers['x-client']}`;
      const running = await counter.incr(key);
      if (running > most) most = running;
      await sleep(role.holdMs);
      // Counted out before the response ends, so before its slot is released.
      await counter.decr(key);
      response.end('ok');
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send?.({ port: (server.address() as AddressInfo).port });
  process.on('message', (message: { type: string }) => {
    if (message.type === 'most') process.send?.({ most });
  });
}

/** Takes `count` leases, reports them, and waits to be killed. */
async function hold(role: Extract<LeaseRole, { role: 'hold' }>, slots: Limiter) {
  const leases: Lease[] = [];
  for (let i = 0; i < role.count; i++) {
    const decision = await slots.limit('victim');
    if (decision.lease === undefined) throw new Error(`lease ${i} refused: ${JSON.stringify(decision)}`);
    leases.push(decision.lease);
  }
  process.send?.({ leases });
  setInterval(() => {}, 60_000);
}

/** `loops` loops at once, each acquiring `each` times in turn (held: the limit leaves room for all). */
async function tokens(role: Extract<LeaseRole, { role: 'tokens' }>, slots: Limiter) {
  const go = new Promise<void>((resolve) => process.once('message', () => resolve()));
  process.send?.({ ready: true });
  await go;
  const stamped: Stamped[][] = await Promise.all(
    Array.from({ length: role.loops }, async () => {
      const loop: Stamped[] = [];
      while (loop.length < role.each) {
        const sentAt = now();
        const decision = await slots.limit('fenced');
        const answeredAt = now();
        if (decision.lease === undefined) throw new Error(`refused: ${JSON.stringify(decision)}`);
        loop.push({ token: decision.lease.token, sentAt, answeredAt });
      }
      return loop;
    }),
  );
  process.send?.({ stamped });
}

async function main(): Promise<void> {
  const port = Number(process.argv[2]);
  const role = (await new Promise((resolve) => process.once('message', resolve))) as LeaseRole;
  const { slots, rate, redis } = await limiters(port, role);
  if (role.role === 'serve') await serve(role, slots, rate, redis);
  else if (role.role === 'hold') await hold(role, slots);
  else await tokens(role, slots);
}

process.on('disconnect', () => process.exit(0));
void main();
