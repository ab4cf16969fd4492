// sluice/fetch and sluice/hono served by the running runtime's own server (Node, Bun, Deno), on Redis, called over real HTTP.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Hono } from 'hono';
import { rateLimit as fetchRateLimit, headerKey } from '../../src/http/adapters/fetch.js';
import { rateLimit as honoRateLimit } from '../../src/http/adapters/hono.js';
import { createLimiter, fixedWindow, type Limiter, MemoryStore, RedisStore } from '../../src/index.js';
import { type ClientKind, type Connected, connect } from '../helpers/clients.js';
import { NOW, WINDOW_MS } from '../helpers/http/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { peerAddress, RUNTIME, type Served, serveHere } from './serve-here.js';

const LIMIT = 100;
const REQUESTS = 500;
// The two clients a Bun or Deno application most often brings; the others run in the differential suite.
const KINDS: readonly ClientKind[] = ['ioredis', 'node-redis'];
// Set by the server, not by sluice: the date, and how the body is framed on the wire.
const SERVER_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
// What sluice adds to an allowed response: the rest (its content type) is the application's and the runtime's.
const LIMIT_HEADERS = new Set(['ratelimit', 'ratelimit-policy', 'retry-after']);

/**
 * What the middleware made of a response, as bytes to compare: status, headers sorted, body. A 429
 * is sluice's whole; of an allowed response only the rate-limit headers are. The same literal is
 * expected on every runtime, so a header or a 429 that differs from Node's fails.
 */
async function transcript(response: Response): Promise<string> {
  const ours = (name: string) =>
    response.status === 429 ? !SERVER_HEADERS.has(name) : LIMIT_HEADERS.has(name);
  const headers = [...response.headers]
    .filter(([name]) => ours(name))
    .map(([name, value]) => `${name}: ${value}`)
    .sort();
  return `${response.status}\n${headers.join('\n')}\n\n${await response.text()}`;
}

// A fixed clock 20 s before the end of a 60 s window: every runtime's headers carry the same numbers.
const ALLOWED_LAST = [
  '200',
  'ratelimit-policy: "api";q=100;w=60',
  'ratelimit: "api";r=0;t=20',
  '',
  'ok',
].join('\n');
const REFUSED = [
  '429',
  'content-type: application/problem+json',
  'ratelimit-policy: "api";q=100;w=60',
  'ratelimit: "api";r=0;t=20',
  'retry-after: 20',
  '',
  JSON.stringify({
    type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
    title: 'Too Many Requests',
    status: 429,
    detail: 'Quota exceeded for policy "api" (100 per 60 s). Retry in 20 s.',
    'violated-policies': ['api'],
  }),
].join('\n');

let server: RedisServer;
const clients = new Map<ClientKind, Connected>();
let prefixes = 0;

before(async () => {
  server = await startRedis();
  for (const kind of KINDS) clients.set(kind, await connect(kind, server.port));
});
after(async () => {
  for (const client of clients.values()) await client.close();
  await server.stop();
});

function redisLimiter(kind: ClientKind): Limiter {
  const client = clients.get(kind);
  assert.ok(client !== undefined);
  const store = new RedisStore({ client: client.client, prefix: `runtime-${RUNTIME.name}-${++prefixes}` });
  // A busy machine must not turn a slow reply into a failure-policy decision: the counts are exact.
  return createLimiter({
    store,
    policy: fixedWindow({ limit: LIMIT, windowMs: WINDOW_MS }),
    name: 'api',
    clock: () => NOW,
    timeoutMs: 60_000,
  });
}

const APPS: ReadonlyArray<[string, (limiter: Limiter) => Parameters<typeof serveHere>[0]]> = [
  [
    'sluice/fetch around a fetch handler',
    (limiter) => fetchRateLimit({ limiter, key: headerKey('x-api-key') }).wrap(() => new Response('ok')),
  ],
  [
    'sluice/hono in a Hono app',
    (limiter) => {
      const app = new Hono().use(honoRateLimit({ limiter, key: headerKey('x-api-key') }));
      app.get('/', (c) => c.text('ok'));
      return (request: Request, ...context: never[]) => app.fetch(request, ...context);
    },
  ],
];

/** Sends `count` requests at once with one API key; every response read to its end. */
async function burst(served: Served, count: number): Promise<Response[]> {
  return Promise.all(
    Array.from({ length: count }, () => fetch(`${served.origin}/`, { headers: { 'x-api-key': 'one-key' } })),
  );
}

describe(`${RUNTIME.name} ${RUNTIME.version}: served over HTTP on a Redis-backed limiter`, () => {
  for (const [label, build] of APPS) {
    for (const kind of KINDS) {
      test(`${label} (${kind}): ${REQUESTS} parallel requests at a limit of ${LIMIT}`, async () => {
        const limiter = redisLimiter(kind);
        const served = await serveHere(build(limiter));
        try {
          const responses = await burst(served, REQUESTS);
          const bodies = await Promise.all(responses.map((response) => transcript(response)));
          const allowed = responses.filter((response) => response.status === 200).length;
          const refused = bodies.filter((body) => body === REFUSED).length;
          assert.equal(allowed, LIMIT, `${served.server}: exactly ${LIMIT} allowed`);
          assert.equal(
            refused,
            REQUESTS - LIMIT,
            `${served.server}: every other answer is the same 429:\n${bodies.find((b) => b.startsWith('429'))}`,
          );
          assert.ok(
            bodies.includes(ALLOWED_LAST),
            `the last allowed request's headers:\n${bodies.find((b) => b.startsWith('200'))}`,
          );
          assert.equal((await limiter.peek('one-key')).remaining, 0);
        } finally {
          await served.close();
        }
      });
    }
  }

  test("count: 'failed' over this runtime's server: a success is given back once its response is sent", async () => {
    // Deno's server aborts request.signal after a successful response too: that must not count as a failure.
    const store = new MemoryStore();
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 1, windowMs: WINDOW_MS }),
      name: 'api',
    });
    const served = await serveHere(
      fetchRateLimit({ limiter, key: headerKey('x-api-key'), count: 'failed' }).wrap(
        () => new Response('ok'),
      ),
    );
    try {
      for (let i = 0; i < 3; i++) {
        const response = await fetch(`${served.origin}/`, { headers: { 'x-api-key': 'k' } });
        assert.deepEqual([response.status, await response.text()], [200, 'ok'], `request ${i + 1}`);
        // The refund follows the response's end; the next request waits for it (or fails here when it never comes).
        let remaining = 0;
        for (let polls = 0; polls < 250 && remaining === 0; polls++) {
          remaining = (await limiter.peek('k')).remaining;
          if (remaining === 0) await new Promise((resolve) => setTimeout(resolve, 20));
        }
        assert.equal(remaining, 1, `request ${i + 1} was given back`);
      }
    } finally {
      await served.close();
      store.close();
    }
  });

  test('the fetch adapter keyed by the peer address this runtime passes to the handler', async () => {
    const store = new MemoryStore();
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 1, windowMs: WINDOW_MS }),
      name: 'api',
      // The fixed clock: no window ends between the two requests, the second is refused.
      clock: () => NOW,
    });
    const served = await serveHere(
      fetchRateLimit({ limiter, remoteAddress: peerAddress }).wrap(() => new Response('ok')),
    );
    try {
      const [first, second] = [await fetch(`${served.origin}/`), await fetch(`${served.origin}/`)];
      assert.deepEqual([first.status, await first.text(), second.status], [200, 'ok', 429]);
      await second.text();
      assert.equal((await limiter.peek('127.0.0.1')).remaining, 0, 'the loopback address is the key');
    } finally {
      await served.close();
      store.close();
    }
  });
});
