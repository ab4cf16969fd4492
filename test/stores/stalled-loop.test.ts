// A reply that has arrived is never late: when this process's own event loop is what kept a reply
// unread (a burst being decoded, a long callback), the decision is the store's, not the timeout's.
// The scene is the one a busy service makes: the deadline sweep is already due when a handler starts
// calls, and the same turn of the loop then stays busy well past `timeoutMs` while Redis answers.
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createLimiter, type Decision, fixedWindow, RedisStore } from '../../src/index.js';
import { CLIENT_KINDS, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const TIMEOUT_MS = 50;
/** How long the loop is kept busy after the calls are sent: several timeouts. */
const STALL_MS = 6 * TIMEOUT_MS;
const CALLS = 100;

function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // The work a burst of requests makes: nothing else runs on this thread meanwhile.
  }
}

/** A loopback socket pair: what is written to `sender` arrives as an I/O event on the other end. */
async function socketPair(): Promise<{ server: Server; sender: Socket; receiver: Socket }> {
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const sender = tcpConnect(port, '127.0.0.1');
  const receiver = await accepted;
  return { server, sender, receiver };
}

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

describe('decisions whose replies wait behind a busy event loop', () => {
  for (const kind of CLIENT_KINDS) {
    test(`${kind}: ${CALLS} calls answered by Redis, none by the timeout`, async () => {
      const connected = await connect(kind, redis.port);
      // Two loopback connections written in turn: their data are two I/O callbacks of one poll phase,
      // the first starting the calls, the second keeping the thread busy after every continuation of
      // the first (the store's flush included) has run.
      const calls = await socketPair();
      const stall = await socketPair();
      try {
        const store = new RedisStore({ client: connected.client, prefix: `stall-${kind}` });
        const limiter = createLimiter({
          store,
          policy: fixedWindow({ limit: 1_000, windowMs: 60_000 }),
          name: 'stall',
          timeoutMs: TIMEOUT_MS,
          onStoreError: 'deny',
        });
        await limiter.limit('warm-up');
        const decided = new Promise<Decision[]>((resolve) => {
          // The calls start in an I/O callback, in the same turn of the loop as a sweep of the
          // deadlines that is already due and runs after this turn's I/O.
          calls.receiver.once('data', () => {
            const pending: Array<Promise<Decision>> = [];
            for (let i = 0; i < CALLS; i++) pending.push(limiter.limit(`client-${i}`));
            resolve(Promise.all(pending));
          });
        });
        // Redis answers while this thread is busy: the replies sit unread on the socket.
        stall.receiver.once('data', () => busyFor(STALL_MS));
        // A call in flight arms the deadlines' timer; the thread is then busy past it, so the sweep is
        // due at the next turn, whose poll phase brings the two connections' data.
        const armed = limiter.limit('arms-the-timer');
        busyFor(2 * TIMEOUT_MS);
        calls.sender.write('go');
        stall.sender.write('stall');
        await armed;
        const decisions = await decided;
        const reasons = decisions.map((decision) => decision.reason ?? 'store');
        assert.deepEqual(
          reasons.filter((reason) => reason !== 'store'),
          [],
          `${reasons.filter((reason) => reason !== 'store').length} of ${CALLS} answered by the failure policy`,
        );
        assert.equal(decisions.filter((decision) => decision.allowed).length, CALLS);
        // Each was counted once by Redis: the window holds the calls, the warm-up and the timer's.
        const peeked = await limiter.peek('client-0');
        assert.equal(peeked.remaining, 1_000 - 1);
      } finally {
        for (const pair of [calls, stall]) {
          pair.sender.destroy();
          pair.receiver.destroy();
          pair.server.close();
        }
        await connected.close();
      }
    });
  }
});
