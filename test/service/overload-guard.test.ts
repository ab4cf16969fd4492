// `sluice serve` refuses its own overload over HTTP: with the guard held at 2 in flight and no wait, concurrent
// POST /v1/limit on Redis are partly refused 503 with Retry-After and a temporary-reduced-capacity problem, counted in
// sluice_service_shed_total{protocol="http"}, none answered by the failure policy; with --no-shed all are answered.
// And the guard's wait, in process on a clock of its own: a burst waits oldest first, overload waits briefly, newest first.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, beforeEach, describe, mock, test } from 'node:test';
import { ServiceGuard } from '../../packages/server/src/service/guard.js';
import type { Refusal, Ticket } from '../../src/shed/index.js';
import { type ServeProcess, startServe, writeConfig } from '../helpers/cli.js';
import { metric } from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const CONCURRENT = 300;
const LIMIT = 100;
const TIGHT = ['--shed-limit', '2', '--shed-min', '1', '--shed-max', '2', '--shed-queue', '0'];

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Record<string, unknown>;
}

/** One POST /v1/limit on a connection of its own (as many clients would send it). */
function limit(base: string, key: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const outgoing = request(`${base}/v1/limit`, { method: 'POST', agent: false }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: JSON.parse(text) }),
      );
    });
    outgoing.on('error', reject);
    outgoing.end(JSON.stringify({ policy: 'api', key }));
  });
}

const all = (base: string, key: string): Promise<Reply[]> =>
  Promise.all(Array.from({ length: CONCURRENT }, () => limit(base, key)));

describe('the overload guard over HTTP, on Redis', () => {
  let redis: RedisServer;
  let config: ReturnType<typeof writeConfig>;
  const started: ServeProcess[] = [];
  const serve = async (args: readonly string[]): Promise<ServeProcess> => {
    const running = await startServe(['--config', config.path, '--redis', redis.url, ...args]);
    started.push(running);
    return running;
  };

  before(async () => {
    redis = await startRedis();
    config = writeConfig({
      // A generous store timeout: on a loaded machine a late Redis reply must not pass for the guard's doing.
      policies: {
        api: {
          algorithm: 'fixedWindow',
          limit: LIMIT,
          windowMs: 3_600_000,
          onStoreError: 'deny',
          timeoutMs: 5000,
        },
      },
    });
  });
  after(async () => {
    for (const { running } of started) {
      running.child.kill('SIGTERM');
      await running.exited;
    }
    await redis.stop();
    config.remove();
  });
  // Each test counts its concurrent calls to exactly the limit in the service's hour window: it must not end meanwhile.
  beforeEach(() => clearOfWindowEnd(3_600_000, 30_000));

  test(`${CONCURRENT} concurrent POST /v1/limit past a limit of 2: 503 with Retry-After, counted, none by the failure policy`, async () => {
    const { base } = await serve(TIGHT);
    const replies = await all(base, `tight-${Date.now()}`);
    const refused = replies.filter((reply) => reply.status === 503);
    const decided = replies.filter((reply) => reply.status === 200 || reply.status === 429);
    assert.equal(refused.length + decided.length, CONCURRENT, 'every request refused or decided');
    assert.ok(refused.length > 0, 'concurrent requests past the limit are refused in part');
    assert.ok(decided.length > 0, 'the admitted ones are decided');
    for (const reply of refused) {
      assert.equal(reply.headers['retry-after'], '1');
      assert.equal(reply.headers['content-type'], 'application/problem+json');
      assert.equal(
        reply.body.type,
        'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
      );
      assert.equal(reply.body.status, 503);
      // Not a decision: nothing the failure policy answered.
      assert.equal(reply.body.reason, undefined);
      assert.equal(reply.body.allowed, undefined);
    }
    // Decided as usual by Redis: none by the failure policy, exactly the limit allowed when all fit in it.
    for (const reply of decided) assert.equal(reply.body.reason, undefined, JSON.stringify(reply.body));
    assert.equal(decided.filter((reply) => reply.status === 200).length, Math.min(LIMIT, decided.length));
    assert.equal(await metric(base, 'sluice_service_shed_total', { protocol: 'http' }), refused.length);
    assert.equal(await metric(base, 'sluice_service_shed_total', { protocol: 'grpc' }), 0);
    // The limit moves with latency, within its bounds.
    const limitNow = await metric(base, 'sluice_service_shed_limit');
    assert.ok(limitNow >= 1 && limitNow <= 2, `limit ${limitNow}`);
  });

  test('a burst is not overload: 500 concurrent POST /v1/limit with the default guard are all decided, exactly the limit allowed', async () => {
    const { base } = await serve([]);
    const key = `burst-${Date.now()}`;
    const replies = await Promise.all(Array.from({ length: 500 }, () => limit(base, key)));
    assert.equal(replies.filter((reply) => reply.status === 200).length, LIMIT);
    assert.equal(replies.filter((reply) => reply.status === 429).length, 500 - LIMIT);
    for (const reply of replies) assert.equal(reply.body.reason, undefined, JSON.stringify(reply.body));
    assert.equal(await metric(base, 'sluice_service_shed_total', { protocol: 'http' }), 0);
  });

  test('--no-shed: every request is decided, exactly the limit allowed', async () => {
    const { base } = await serve(['--no-shed']);
    const replies = await all(base, `off-${Date.now()}`);
    assert.equal(replies.filter((reply) => reply.status === 503).length, 0);
    assert.equal(replies.filter((reply) => reply.status === 200).length, LIMIT);
    assert.equal(replies.filter((reply) => reply.status === 429).length, CONCURRENT - LIMIT);
  });
});

describe('the guard’s wait, in process', () => {
  const settings = {
    initial: 2,
    min: 2,
    max: 2,
    queue: 3,
    burstMs: 2000,
    waitMs: 50,
    retryAfterMs: 1000,
    streams: 100,
  };
  const clock = { nowMs: 0 };
  const now = (): number => clock.nowMs;
  const ticket = (admission: Ticket | Refusal | Promise<Ticket | Refusal>): Ticket => {
    assert.ok(!(admission instanceof Promise) && admission.allowed);
    return admission as Ticket;
  };

  test('a burst waits, oldest first, up to burstMs; past the queue it is refused at once', async () => {
    clock.nowMs = 0;
    const guard = new ServiceGuard(settings, { now, watchLoop: false });
    const [a, b] = [ticket(guard.acquire('grpc')), ticket(guard.acquire('grpc'))];
    const first = guard.acquire('grpc');
    clock.nowMs = 10;
    const second = guard.acquire('http');
    const third = guard.acquire('grpc');
    assert.ok(first instanceof Promise && second instanceof Promise && third instanceof Promise);
    // The queue holds 3: a fourth is refused, counted under its protocol.
    const fourth = guard.acquire('http');
    assert.ok(!(fourth instanceof Promise) && !fourth.allowed);
    clock.nowMs = 1500;
    guard.done(a);
    const admitted = await first;
    assert.equal(admitted.allowed, true, 'the oldest waiter gets the room, 1.5 s on (a burst)');
    guard.done(b);
    assert.equal((await second).allowed, true);
    assert.deepEqual(guard.stats().refused, { grpc: 0, http: 1 });
    guard.close();
    assert.equal((await third).allowed, false, 'closing refuses who still waits');
  });

  test('once the wait has not emptied for burstMs it is overload: the newest goes first, the old are refused after waitMs', async () => {
    clock.nowMs = 0;
    const guard = new ServiceGuard(settings, { now, watchLoop: false });
    const held = [ticket(guard.acquire('grpc')), ticket(guard.acquire('grpc'))];
    const old = guard.acquire('grpc');
    clock.nowMs = 2100;
    const newer = guard.acquire('grpc');
    clock.nowMs = 2120;
    const newest = guard.acquire('grpc');
    assert.equal(guard.stats().overloaded, true);
    guard.done(held[0] as Ticket);
    // `old` waited 2.1 s, more than waitMs: refused; of the others the newest is admitted first.
    assert.equal((await old).allowed, false);
    assert.equal((await newest).allowed, true);
    clock.nowMs = 2200;
    guard.done(held[1] as Ticket);
    assert.equal((await newer).allowed, false, 'newer has waited 100 ms, past waitMs');
    assert.equal(guard.stats().refused.grpc, 2);
    guard.close();
  });

  test('refusals that empty the wait do not end an overload: the next waiter still waits waitMs, not burstMs', async () => {
    clock.nowMs = 0;
    const guard = new ServiceGuard(settings, { now, watchLoop: false });
    after(() => guard.close()); // a failed assertion must not leave its expiry timer running
    const held = [ticket(guard.acquire('grpc')), ticket(guard.acquire('grpc'))];
    const old = guard.acquire('grpc');
    clock.nowMs = 2100;
    const newer = guard.acquire('grpc');
    assert.equal(guard.stats().overloaded, true);
    // No room comes back: the expiry tick (every 10 ms) refuses both, past waitMs, and the wait is empty.
    clock.nowMs = 2200;
    assert.equal((await old).allowed, false);
    assert.equal((await newer).allowed, false);
    assert.equal(guard.stats().queued, 0);
    clock.nowMs = 2210;
    const next = guard.acquire('grpc');
    assert.ok(next instanceof Promise);
    assert.equal(guard.stats().overloaded, true, 'emptied by refusing, not by admitting: still overload');
    clock.nowMs = 2270;
    assert.equal((await next).allowed, false, 'refused after waitMs (60 ms), as under overload');
    // Empty for waitMs and more: a waiter then starts a burst of its own.
    clock.nowMs = 3000;
    const fresh = guard.acquire('grpc');
    assert.equal(guard.stats().overloaded, false);
    guard.done(held[0] as Ticket);
    assert.equal((await fresh).allowed, true);
    guard.done(held[1] as Ticket);
    guard.close();
  });

  test('a loop behind by more than waitMs for burstMs refuses calls without a deadline at once; a call whose deadline is longer waits', () => {
    clock.nowMs = 0;
    // The process ran the whole time (its CPU clock moved with the wall clock): the delay is its own work.
    const guard = new ServiceGuard(settings, { now, cpuNow: now, watchLoop: true });
    try {
      // The loop's timer has not run for 2.5 s: what arrives now has waited that long unread. It
      // counts as overload once the limit's min (2) calls came in that time: the first is taken.
      clock.nowMs = 2500;
      const first = guard.acquire('http');
      assert.ok(!(first instanceof Promise) && first.allowed, 'one call in 2.5 s: a slow loop, not overload');
      const plain = guard.acquire('http');
      assert.ok(
        !(plain instanceof Promise) && !plain.allowed,
        'no deadline: refused while the loop is that far behind',
      );
      const patient = guard.acquire('grpc', 30_000);
      assert.ok(
        !(patient instanceof Promise) && patient.allowed,
        'a 30 s deadline: the service can still answer in time',
      );
      const hurried = guard.acquire('grpc', 20);
      assert.ok(!(hurried instanceof Promise) && !hurried.allowed, 'a 20 ms deadline has passed already');
      assert.deepEqual(guard.stats().refused, { grpc: 1, http: 1 });
    } finally {
      guard.close();
    }
  });

  test('a loop late because the process did not run (its CPU time did not move) is not overloaded: nothing refused', () => {
    clock.nowMs = 0;
    const cpu = { ms: 0 };
    const guard = new ServiceGuard(settings, { now, cpuNow: () => cpu.ms, watchLoop: true });
    try {
      // 2.5 s on the wall clock, 3 ms of the process's CPU: the machine ran something else (or stopped it).
      clock.nowMs = 2500;
      cpu.ms = 3;
      // One after the other (the limit is 2): two without a deadline, then one whose 20 ms would have passed.
      for (const [protocol, deadlineMs] of [['http'], ['http'], ['grpc', 20]] as const) {
        const admission = guard.acquire(protocol, deadlineMs);
        assert.ok(!(admission instanceof Promise) && admission.allowed, `${protocol} admitted, not refused`);
        guard.done(admission as Ticket);
      }
      assert.equal(guard.stats().overloaded, false);
      assert.deepEqual(guard.stats().refused, { grpc: 0, http: 0 });
    } finally {
      guard.close();
    }
  });

  test('under sustained overload a turn of the loop answers what it reads in its first waitMs and refuses the rest', () => {
    // The lag timer runs when the test says (mocked); the wall and CPU clocks move as the test says.
    mock.timers.enable({ apis: ['setInterval'] });
    clock.nowMs = 0;
    const cpu = { ms: 0 };
    const roomy = { ...settings, initial: 1000, max: 1000, queue: 0, burstMs: 200 };
    const guard = new ServiceGuard(roomy, { now, cpuNow: () => cpu.ms, watchLoop: true });
    const work = (wallMs: number, cpuMs = wallMs): void => {
      clock.nowMs += wallMs;
      cpu.ms += cpuMs;
    };
    const admitted = (protocol: 'grpc' | 'http'): boolean => {
      const admission = guard.acquire(protocol);
      assert.ok(!(admission instanceof Promise));
      if (admission.allowed) guard.done(admission);
      return admission.allowed;
    };
    try {
      // Turns of 100 ms of the process's own work each, for longer than burstMs (200 ms): overload.
      for (let turn = 0; turn < 5; turn++) {
        work(100);
        mock.timers.tick(10);
        // Read as a turn starts, a call has waited about half the last turn (45 ms < waitMs): answered.
        assert.equal(admitted('http'), true, `turn ${turn}: read as the turn starts`);
      }
      // 30 ms into the turn, of the process's own work: 45 + 20 > waitMs, refused.
      work(30);
      assert.equal(admitted('http'), false, 'read late in a long turn of its own work');
      assert.equal(admitted('grpc'), false);
      // The next turn answers again what it reads first.
      work(70);
      mock.timers.tick(10);
      assert.equal(admitted('http'), true, 'read as the next turn starts');
      // 30 ms on the wall clock during which the machine ran something else: not the process's delay.
      work(30, 0);
      assert.equal(admitted('http'), true, 'late on the wall clock only');
      // One short turn (a timer, nothing read) between long ones has not caught up: still overload.
      work(15);
      mock.timers.tick(10);
      work(70);
      assert.equal(admitted('http'), false, '60 ms into a long turn after a short one');
      // The long turn, then turns within half of waitMs for a quarter of burstMs (50 ms): caught up.
      for (let turn = 0; turn < 8; turn++) {
        work(12);
        mock.timers.tick(10);
      }
      work(70);
      assert.equal(admitted('http'), true, 'caught up: a long turn alone is not overload');
      assert.deepEqual(guard.stats().refused, { grpc: 1, http: 2 });
    } finally {
      guard.close();
      mock.timers.reset();
    }
  });
});
