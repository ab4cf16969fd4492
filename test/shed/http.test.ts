// `shed()` of every adapter over real HTTP: 503 with Retry-After and a problem body, tickets back when responses
// end or clients go away, 5xx counted as dropped; and beside rateLimit, neither takes from the other.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, test } from 'node:test';
import express from 'express';
import { rateLimit, shed } from '../../src/http/adapters/express.js';
import { createLimiter, fixedWindow, MemoryStore } from '../../src/index.js';
import { createShedder, type Shedder } from '../../src/shed/index.js';
import { Holds, SHED_APPS } from '../helpers/http/shed-apps.js';
import { clearOfWindowEnd } from '../helpers/window.js';

/** A shedder with a limit of exactly 2: critical may fill both, sheddable one. */
function twoTickets(): Shedder {
  return createShedder({
    limit: { algorithm: 'aimd', initial: 2, min: 2, max: 2 },
    priorities: [{ name: 'critical', reserve: 0.5 }, 'sheddable'],
  });
}

async function until(check: () => boolean): Promise<void> {
  for (let tries = 0; !check(); tries += 1) {
    assert.ok(tries < 5000, 'the condition did not come true');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** A GET the test can abandon: `done` settles with the reply, `abort` destroys its connection. */
function held(url: string, priority: string) {
  const sent = request(url, { headers: { 'x-priority': priority }, agent: false });
  const done = new Promise<number>((resolve) => {
    sent.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    sent.on('error', () => resolve(0));
  });
  sent.end();
  return { done, abort: () => sent.destroy() };
}

/** A GET of a streamed body: `first` settles at its first chunk, `done` with its status at its end. */
function streamedGet(url: string, priority: string) {
  const sent = request(url, { headers: { 'x-priority': priority }, agent: false });
  let chunk: () => void = () => {};
  const first = new Promise<void>((resolve) => {
    chunk = resolve;
  });
  const done = new Promise<number>((resolve) => {
    sent.on('response', (response) => {
      response.once('data', () => chunk());
      response.on('data', () => {});
      response.on('end', () => resolve(response.statusCode ?? 0));
      response.on('error', () => resolve(0));
    });
    sent.on('error', () => resolve(0));
  });
  sent.end();
  return { first, done, abort: () => sent.destroy() };
}

for (const [name, build] of SHED_APPS) {
  describe(`shed (${name})`, () => {
    test('a class over its share gets 503, Retry-After and a temporary-reduced-capacity problem; tickets come back', async () => {
      const shedder = twoTickets();
      const holds = new Holds();
      const app = await build(shedder, holds);
      try {
        const first = held(`${app.url}/hold/a`, 'sheddable');
        await holds.reached('a');
        const refused = await fetch(`${app.url}/`, { headers: { 'x-priority': 'sheddable' } });
        assert.equal(refused.status, 503);
        assert.equal(refused.headers.get('retry-after'), '1');
        assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json\b/);
        const problem = (await refused.json()) as { type: string; status: number; priority: string };
        assert.equal(
          problem.type,
          'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
        );
        assert.equal(problem.status, 503);
        assert.equal(problem.priority, 'sheddable');
        // Critical still has the reserve.
        const critical = await fetch(`${app.url}/`, { headers: { 'x-priority': 'critical' } });
        assert.equal(critical.status, 200);
        await critical.text();
        holds.release('a');
        assert.equal(await first.done, 200);
        await until(() => shedder.inFlight === 0);
        const stats = shedder.stats().priorities;
        assert.deepEqual([stats.sheddable?.admitted, stats.sheddable?.refused], [1, 1]);
        assert.deepEqual([stats.critical?.admitted, stats.sheddable?.dropped], [1, 0]);
      } finally {
        holds.releaseAll();
        await app.close();
      }
    });
    test('a 5xx counts as dropped; a client that goes away gives its ticket back, dropped', async () => {
      const shedder = twoTickets();
      const holds = new Holds();
      const app = await build(shedder, holds);
      try {
        const failed = await fetch(`${app.url}/status/500`, { headers: { 'x-priority': 'critical' } });
        assert.equal(failed.status, 500);
        await failed.text();
        await until(() => shedder.inFlight === 0);
        assert.equal(shedder.stats().priorities.critical?.dropped, 1);
        const gone = held(`${app.url}/hold/b`, 'critical');
        await holds.reached('b');
        assert.equal(shedder.inFlight, 1);
        gone.abort();
        await until(() => shedder.inFlight === 0);
        assert.equal(shedder.stats().priorities.critical?.dropped, 2);
        holds.release('b');
      } finally {
        holds.releaseAll();
        await app.close();
      }
    });
    test('a streamed body holds its ticket to its last chunk, and its latency covers it; a hang-up mid-body drops it', async () => {
      const clock = { nowMs: 0 };
      // One request closes a window: the shedder's latency is that request's, grant to release.
      const shedder = createShedder({
        limit: { algorithm: 'aimd', initial: 2, min: 2, max: 2, windowMs: 1, windowSamples: 1 },
        priorities: [{ name: 'critical', reserve: 0.5 }, 'sheddable'],
        now: () => clock.nowMs,
      });
      const holds = new Holds();
      const app = await build(shedder, holds);
      try {
        const whole = streamedGet(`${app.url}/stream/a`, 'critical');
        await whole.first;
        // The handler has answered and the first chunk is out: the ticket is still held.
        assert.equal(shedder.inFlight, 1);
        clock.nowMs = 1000;
        holds.release('a');
        assert.equal(await whole.done, 200);
        await until(() => shedder.inFlight === 0);
        assert.equal(shedder.stats().latencyMs, 1000);
        assert.equal(shedder.stats().priorities.critical?.dropped, 0);
        const cut = streamedGet(`${app.url}/stream/b`, 'critical');
        await cut.first;
        assert.equal(shedder.inFlight, 1);
        cut.abort();
        await until(() => shedder.inFlight === 0);
        assert.equal(shedder.stats().priorities.critical?.dropped, 1);
        holds.release('b');
      } finally {
        holds.releaseAll();
        await app.close();
      }
    });
  });
}

describe('shed beside rateLimit (express)', () => {
  test('rateLimit first: a rate-limited request takes no ticket; a shed one gets its unit back', async () => {
    // The limit is counted to a 429 in a minute's window: it must not end meanwhile.
    await clearOfWindowEnd(60_000, 10_000);
    const store = new MemoryStore();
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 3, windowMs: 60_000 }),
      name: 'api',
    });
    const shedder = twoTickets();
    const holds = new Holds();
    const app = express();
    app.use(
      rateLimit({
        limiter,
        key: () => 'one-client',
        count: 'successful',
        isFailure: (status) => status === 503,
      }),
    );
    app.use(shed({ shedder, priority: (req) => req.get('x-priority') }));
    app.get(/.*/, (req, res) => {
      const id = /^\/hold\/(.+)$/.exec(req.path)?.[1];
      (id === undefined ? Promise.resolve() : holds.hold(id)).then(() => res.send('ok'));
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const first = held(`${url}/hold/a`, 'sheddable'); // unit 1, ticket 1
      await holds.reached('a');
      for (let i = 0; i < 3; i += 1) {
        const refused = await fetch(url, { headers: { 'x-priority': 'sheddable' } });
        assert.equal(refused.status, 503); // shed: its unit given back once it finished
        await refused.text();
      }
      await until(() => shedder.stats().priorities.sheddable?.refused === 3);
      assert.equal((await limiter.peek('one-client')).remaining, 2);
      holds.release('a');
      await first.done;
      const ok = [await fetch(url), await fetch(url)];
      assert.deepEqual(
        ok.map((response) => response.status),
        [200, 200],
      );
      const limited = await fetch(url);
      assert.equal(limited.status, 429);
      await until(() => shedder.inFlight === 0);
      // Three tickets (a and the two 200s), none for the 429.
      assert.deepEqual(shedder.stats().priorities.sheddable, {
        inFlight: 0,
        queued: 0,
        admitted: 3,
        refused: 3,
        dropped: 0,
      });
    } finally {
      holds.releaseAll();
      server.closeAllConnections();
      server.close();
      store.close();
    }
  });
});
