// The answers of one turn of the event loop leave together, after every request that turn read was decided.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, constants, createServer as createHttp2Server, type ServerHttp2Stream } from 'node:http2';
import { connect as connectTcp, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadServices } from '../../packages/server/src/envoy/grpc.js';
import { frame } from '../../packages/server/src/envoy/grpc-wire.js';
import { DEFAULT_BOUNDS, startEnvoy } from '../../packages/server/src/envoy/index.js';
import { RequestLog } from '../../packages/server/src/service/request-log.js';
import { createService } from '../../packages/server/src/service/service.js';
import { createLimiter, fixedWindow, MemoryStore } from '../../src/index.js';

/** How many requests are sent in one go, so that the server reads them all in one turn. */
const REQUESTS = 20;

/** Counts the store's decisions: every `decide*` method of this store, counted as it is called. */
function countDecisions(store: MemoryStore): { readonly count: number } {
  const counter = { count: 0 };
  const methods = Object.getOwnPropertyNames(MemoryStore.prototype).filter((name) =>
    name.startsWith('decide'),
  );
  assert.ok(methods.length > 0);
  for (const name of methods) {
    const own = (store as unknown as Record<string, (...args: unknown[]) => unknown>)[name] as (
      ...args: unknown[]
    ) => unknown;
    Object.defineProperty(store, name, {
      value: (...args: unknown[]) => {
        counter.count++;
        return own.apply(store, args);
      },
    });
  }
  return counter;
}

function response(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      const head = text.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(text);
      if (head !== -1 && length !== null && text.length >= head + 4 + Number(length[1])) resolve(text);
    });
    socket.once('error', reject);
  });
}

/** The prototype of node's server-side HTTP/2 streams, from one stream of a server of its own. */
async function serverStreamPrototype(): Promise<ServerHttp2Stream> {
  const server = createHttp2Server();
  let prototype: ServerHttp2Stream | undefined;
  server.on('stream', (stream) => {
    prototype = Object.getPrototypeOf(stream) as ServerHttp2Stream;
    stream.respond({ ':status': 204 }, { endStream: true });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const session = connect(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  await new Promise<void>((resolve, reject) => {
    const stream = session.request({ ':path': '/' });
    stream.on('response', () => resolve()).on('error', reject);
    stream.end();
  });
  session.close();
  server.close();
  assert.ok(prototype !== undefined && typeof prototype.respond === 'function');
  return prototype;
}

describe('answers at the end of the turn', () => {
  test(`POST /v1/limit: ${REQUESTS} requests read in one turn are all decided before the first answer is written`, async () => {
    const store = new MemoryStore();
    const decisions = countDecisions(store);
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 1000, windowMs: 60_000 }),
      name: 'api',
    });
    const service = createService({
      limiters: new Map([['api', limiter]]),
      demo: undefined,
      headers: ['ietf'],
      log: new RequestLog(() => undefined),
    });
    // At each write of an answer to a socket: how many decisions had been made.
    const seenAtWrites: number[] = [];
    const server: Server = createServer(service.listener);
    server.on('connection', (socket: Socket) => {
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
      socket.write = ((...args: unknown[]) => {
        seenAtWrites.push(decisions.count);
        return write(...args);
      }) as Socket['write'];
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const sockets = await Promise.all(
      Array.from(
        { length: REQUESTS },
        () =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connectTcp(port, '127.0.0.1', () => resolve(socket));
            socket.once('error', reject);
          }),
      ),
    );
    try {
      // Every connection accepted by the server before the requests go, all in one synchronous loop.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const answers = sockets.map(response);
      sockets.forEach((socket, i) => {
        const body = `{"policy":"api","key":"user-${i}"}`;
        socket.write(
          `POST /v1/limit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
        );
      });
      const texts = await Promise.all(answers);
      for (const [i, text] of texts.entries()) {
        assert.match(text, /^HTTP\/1\.1 200 /);
        assert.ok(text.includes(`"key":"user-${i}"`) && text.includes('"remaining":999'), text);
      }
      assert.equal(decisions.count, REQUESTS);
      assert.ok(seenAtWrites.length >= REQUESTS, `${seenAtWrites.length} writes`);
      // Written as each was decided, the first answer would leave after the first decision.
      assert.deepEqual(
        new Set(seenAtWrites),
        new Set([REQUESTS]),
        `decisions made at each write: ${seenAtWrites}`,
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      server.close();
      store.close();
    }
  });

  test(`ShouldRateLimit: ${REQUESTS} calls read in one turn are all decided before the first is answered`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-turn-end-'));
    writeFileSync(
      join(dir, 'limits.yaml'),
      'domain: turns\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1000\n',
    );
    const store = new MemoryStore();
    const decisions = countDecisions(store);
    const envoy = await startEnvoy({
      path: dir,
      store,
      oneShard: true,
      host: '127.0.0.1',
      port: 0,
      shadow: false,
      quotaMode: false,
      headers: false,
      metadata: false,
      bounds: DEFAULT_BOUNDS,
      guard: undefined,
      registry: undefined,
      probe: undefined,
      log: () => undefined,
    });
    const { shouldRateLimit } = loadServices();
    // The service's streams are node's: each answer is seen through their class's respond().
    const prototype = await serverStreamPrototype();
    const respond = prototype.respond;
    // At each call's answer: how many decisions had been made.
    const seenAtAnswers: number[] = [];
    prototype.respond = function (
      this: ServerHttp2Stream,
      ...args: Parameters<ServerHttp2Stream['respond']>
    ) {
      seenAtAnswers.push(decisions.count);
      return respond.apply(this, args);
    };
    const session = connect(`http://127.0.0.1:${envoy.port}`);
    try {
      await new Promise<void>((resolve, reject) =>
        session.once('connect', () => resolve()).once('error', reject),
      );
      const calls = Array.from({ length: REQUESTS }, (_, i) => {
        const stream = session.request({
          [constants.HTTP2_HEADER_METHOD]: 'POST',
          [constants.HTTP2_HEADER_PATH]: '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
          'content-type': 'application/grpc',
          te: 'trailers',
        });
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        let status = '';
        stream.on('trailers', (trailers) => {
          status = String(trailers['grpc-status']);
        });
        const done = new Promise<{ status: string; code: number }>((resolve, reject) => {
          stream.on('end', () => {
            // The body is one message: a 5-byte prefix, then the response.
            const body = Buffer.concat(chunks);
            resolve({ status, code: shouldRateLimit.responseDeserialize(body.subarray(5)).overall_code });
          });
          stream.on('error', reject);
        });
        stream.end(
          frame(
            shouldRateLimit.requestSerialize({
              domain: 'turns',
              descriptors: [{ entries: [{ key: 'user', value: `user-${i}` }] }],
              hits_addend: 1,
            } as never),
          ),
        );
        return done;
      });
      const answers = await Promise.all(calls);
      for (const answer of answers) assert.deepEqual(answer, { status: '0', code: 1 });
      assert.equal(decisions.count, REQUESTS);
      assert.equal(seenAtAnswers.length, REQUESTS);
      // Answered as each was decided, the first call would be answered after the first decision.
      assert.deepEqual(
        new Set(seenAtAnswers),
        new Set([REQUESTS]),
        `decisions made at each answer: ${seenAtAnswers}`,
      );
    } finally {
      prototype.respond = respond;
      session.close();
      await envoy.close(0);
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
