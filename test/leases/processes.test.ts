// Concurrency limits across processes sharing one Redis: never more in flight than the limit under a burst (alone and
// beside a rate limit in one all()), a killed holder's slots freed at their expiry by the server's clock and not
// before, and fencing tokens that follow the order in which acquisitions happened, across processes.
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { concurrency, createLimiter, fixedWindow, type Lease, RedisStore } from '../../src/index.js';
import { burst, statusCounts } from '../helpers/http/burst.js';
import { IN_FLIGHT_KEY, type LeaseRole, RATE_WINDOW_MS, type Stamped } from '../helpers/lease-process.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const CHILD = fileURLToPath(new URL('../helpers/lease-process.js', import.meta.url));
const PROCESSES = 4;

let server: RedisServer;
let redis: Redis;
const children: ChildProcess[] = [];
before(async () => {
  server = await startRedis();
  redis = new Redis({ port: server.port, host: '127.0.0.1' });
});
after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  redis.disconnect();
  await server.stop();
});

/** Starts a child in a role; resolves with its first message. */
async function child<T>(role: LeaseRole): Promise<{ process: ChildProcess; first: T }> {
  const started = fork(CHILD, [String(server.port)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(started);
  const first = new Promise<T>((resolve, reject) => {
    started.once('message', (message) => resolve(message as T));
    started.once('exit', (code) => reject(new Error(`lease-process exited with ${code}`)));
  });
  started.send(role);
  return { process: started, first: await first };
}

function ask<T>(process: ChildProcess, message: unknown): Promise<T> {
  return new Promise((resolve) => {
    process.once('message', (reply) => resolve(reply as T));
    process.send(message as object);
  });
}

/** The server's clock, in ms (as the scripts read it). */
async function serverTime(): Promise<number> {
  const [seconds, micros] = (await redis.time()) as [string | number, string | number];
  return Number(seconds) * 1000 + Number(micros) / 1000;
}

describe('500 requests at once on 4 processes sharing a limit of 100 in flight, each held 200 ms', () => {
  for (const beside of [undefined, 10_000] as const) {
    test(
      beside === undefined ? 'the concurrency limit alone' : 'beside a rate limit, in one all()',
      async (t) => {
        await redis.flushall();
        const servers = await Promise.all(
          Array.from({ length: PROCESSES }, () =>
            child<{ port: number }>({
              role: 'serve',
              limit: 100,
              holdMs: 200,
              ...(beside === undefined ? {} : { beside }),
            }),
          ),
        );
        // 125 requests to each process, every one in flight before the first answer is read.
        const replies = (
          await Promise.all(
            servers.map(({ first }) =>
              burst(`http://127.0.0.1:${first.port}/`, 500 / PROCESSES, { 'x-client': 'one' }),
            ),
          )
        ).flat();
        const counts = statusCounts(replies);
        const most = Math.max(
          ...(
            await Promise.all(servers.map(({ process }) => ask<{ most: number }>(process, { type: 'most' })))
          ).map((reply) => reply.most),
        );
        for (const { process } of servers) process.kill('SIGTERM');
        t.diagnostic(`statuses ${JSON.stringify(counts)}; most in flight at once ${most}`);
        assert.deepEqual(Object.keys(counts).sort(), ['200', '429']);
        assert.equal((counts[200] ?? 0) + (counts[429] ?? 0), 500);
        assert.ok(most <= 100, `${most} requests ran at once`);
        assert.ok((counts[200] ?? 0) >= 100, 'every slot was used');
        assert.equal(Number(await redis.get(`${IN_FLIGHT_KEY}:one`)), 0);
        if (beside !== undefined) {
          // Refused for lack of slots took nothing from the rate: it counted exactly the requests served.
          const rate = createLimiter({
            store: new RedisStore({ client: redis }),
            policy: fixedWindow({ limit: beside, windowMs: RATE_WINDOW_MS }),
            name: 'rate',
          });
          assert.equal((await rate.peek('one')).remaining, beside - (counts[200] ?? 0));
        }
      },
    );
  }
});

describe('a process holding 50 leases is SIGKILLed', () => {
  test('its slots come back at their expiry on the server clock: not one before, all at once after', async (t) => {
    await redis.flushall();
    const leaseMs = 1500;
    const { process, first } = await child<{ leases: Lease[] }>({
      role: 'hold',
      limit: 100,
      leaseMs,
      count: 50,
    });
    process.kill('SIGKILL');
    const expiries = first.leases.map((lease) => lease.expiresAt);
    // expiresAt is rounded up: a lease lapses within the millisecond before it, never earlier.
    const firstLapse = Math.min(...expiries) - 1;
    const allLapsed = Math.max(...expiries);
    const slots = createLimiter({
      store: new RedisStore({ client: redis }),
      policy: concurrency({ limit: 100, leaseMs }),
      name: 'slots',
      timeoutMs: 60_000,
      onStoreError: 'deny',
    });
    let looks = 0;
    let beforeAny = 0;
    for (;;) {
      const start = await serverTime();
      // 51 slots need one of the killed process's back; 100 need all of them.
      const one = await slots.peek('victim', { cost: 51 });
      const every = await slots.peek('victim', { cost: 100 });
      const end = await serverTime();
      looks++;
      if (end < firstLapse) {
        beforeAny++;
        assert.equal(
          one.allowed,
          false,
          `a slot was free at ${end}, before the first lease lapsed at ${firstLapse}`,
        );
      }
      if (start >= allLapsed) {
        assert.equal(
          every.allowed,
          true,
          `a slot was still held at ${start}, after the last lapsed at ${allLapsed}`,
        );
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const taken = await slots.limit('victim', { cost: 100 });
    assert.equal(taken.allowed, true);
    assert.equal(taken.reclaimed, 50, 'the call that freed them counted them as lapsed unreleased');
    t.diagnostic(
      `${looks} looks: ${beforeAny} before the first expiry refused, the first after the last allowed`,
    );
    assert.ok(beforeAny > 10, 'the slots were looked at while still held');
  });
});

describe('fencing tokens across 4 processes and 10 000 acquisitions', () => {
  test('all distinct, and an acquisition answered before another was asked has the lower token', async (t) => {
    await redis.flushall();
    const workers = await Promise.all(
      Array.from({ length: PROCESSES }, () =>
        child<{ ready: true }>({ role: 'tokens', limit: 10_000, loops: 25, each: 100 }),
      ),
    );
    const results = await Promise.all(
      workers.map(({ process }) => ask<{ stamped: Stamped[][] }>(process, { type: 'go' })),
    );
    const loops = results.flatMap((result) => result.stamped);
    const all = loops.flat();
    assert.equal(all.length, 10_000);
    assert.equal(new Set(all.map((stamp) => stamp.token)).size, 10_000, 'every token is distinct');
    for (const loop of loops) {
      for (let i = 1; i < loop.length; i++)
        assert.ok((loop[i] as Stamped).token > (loop[i - 1] as Stamped).token);
    }
    // Across processes: for each acquisition, every one answered more than a millisecond before it was
    // asked (margin for the processes' clocks) has a lower token.
    const byAnswer = [...all].sort((a, b) => a.answeredAt - b.answeredAt);
    const bySent = [...all].sort((a, b) => a.sentAt - b.sentAt);
    let highest = 0;
    let next = 0;
    let compared = 0;
    for (const stamp of bySent) {
      while (next < byAnswer.length && (byAnswer[next] as Stamped).answeredAt < stamp.sentAt - 1) {
        highest = Math.max(highest, (byAnswer[next] as Stamped).token);
        next++;
      }
      if (highest > 0) compared++;
      assert.ok(stamp.token > highest, `token ${stamp.token} asked after ${highest} was answered`);
    }
    t.diagnostic(`${compared} of 10000 acquisitions checked against those answered before them`);
    assert.ok(compared > 9000);
  });
});
