// `sluice serve` under hostile input: thousands of malformed bodies, each a short 400; a quiet log; 1,500 held sockets.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type ServeProcess, startServe, writeConfig } from '../helpers/cli.js';
import { seeded } from '../helpers/random.js';

interface Reply {
  status: number;
  contentType: string | undefined;
  body: string;
}

function post(base: string, body: Buffer, agent: Agent): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      `${base}/v1/limit`,
      { method: 'POST', agent, headers: { 'Content-Length': body.length } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            contentType: response.headers['content-type'],
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/**
 * Opens `count` connections: half say nothing, the others start a request and never finish it. Each
 * socket is pushed to `into` as it is made, so that a caller can watch and close them all.
 */
function openHalfStarted(port: number, count: number, into: Socket[] = []): Promise<Socket[]> {
  return Promise.all(
    Array.from(
      { length: count },
      (_, i) =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1', () => {
            if (i % 2 === 1)
              socket.write('POST /v1/limit HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"pol');
            resolve(socket);
          });
          socket.on('error', reject);
          into.push(socket);
        }),
    ),
  );
}

/** A run of this letter longer than any quote the service may make: its echo would show. */
const MARK = 'Z'.repeat(300);

/** Bodies no limit request may be: each must get a 400. */
function malformedBodies(): Buffer[] {
  const random = seeded(20261202);
  const text: string[] = [
    // The key a deeply nested array: the error message once stringified it and overflowed the stack.
    `{"policy":"api","key":${'['.repeat(5000)}${']'.repeat(5000)}}`,
    `{"policy":"api","key":${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}}`,
    `${'['.repeat(8000)}${']'.repeat(8000)}`,
    `{"policy":${'['.repeat(5000)}"${MARK}"${']'.repeat(5000)},"key":"k"}`,
    // Numbers that are not a cost.
    '{"policy":"api","key":"k","cost":1e400}',
    '{"policy":"api","key":"k","cost":-1e400}',
    '{"policy":"api","key":"k","cost":1e20}',
    '{"policy":"api","key":"k","cost":9007199254740993}',
    '{"policy":"api","key":"k","cost":-1}',
    '{"policy":"api","key":"k","cost":0.5}',
    '{"policy":"api","key":"k","cost":-0}',
    `{"policy":"api","key":"k","cost":1${'0'.repeat(5000)}}`,
    '{"policy":"api","key":"k","cost":101}',
    // Wrong types.
    ...['1', '"x"', 'null', 'true', '[]', '{}', `"${MARK}"`, '[{"policy":"api","key":"k"}]'],
    ...['1', 'null', 'true', '["api"]', '{"name":"api"}', `"${MARK}"`].map(
      (p) => `{"policy":${p},"key":"k"}`,
    ),
    ...['1', 'null', 'false', '[]', '{}', '""', '12345678901234567890'].map(
      (k) => `{"policy":"api","key":${k}}`,
    ),
    ...['"1"', 'null', 'true', '[1]', '{"n":1}', `"${MARK}"`].map(
      (c) => `{"policy":"api","key":"k","cost":${c}}`,
    ),
    // A key too long for the limiter, and one that is not well-formed Unicode.
    `{"policy":"api","key":"${MARK.repeat(5)}"}`,
    '{"policy":"api","key":"\\ud800"}',
    '{"policy":"api","key":"a\\udc00b"}',
    // Fields that are not a limit request's, among them prototype pollution.
    '{"__proto__":{"policy":"api","key":"k"}}',
    '{"policy":"api","key":"k","__proto__":{"cost":1000}}',
    '{"constructor":{"prototype":{"polluted":true}},"policy":"api","key":"k"}',
    '{"policy":"__proto__","key":"k"}',
    '{"policy":"constructor","key":"k"}',
    '{"policy":"toString","key":"k"}',
    '{"policy":"hasOwnProperty","key":"k"}',
    `{"policy":"api","key":"k","${MARK}":1}`,
    // Not JSON at all.
    '',
    ' ',
    MARK,
    `{"policy":"api","key":"${MARK}`,
    "{'policy':'api','key':'k'}",
    '{"policy":"api","key":"k",}',
    'policy=api&key=k',
  ];
  // Every proper prefix of a limit request: truncated JSON.
  const valid = `{"policy":"api","key":"client-${MARK}","cost":1}`;
  for (let length = 0; length < valid.length; length++) text.push(valid.slice(0, length));
  const bodies = text.map((body) => Buffer.from(body));
  // Invalid UTF-8: a stray continuation byte, an overlong slash, a truncated sequence, 0xff, inside a key.
  for (const bytes of [[0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xff], [0xed, 0xa0, 0x80]]) {
    bodies.push(
      Buffer.concat([Buffer.from(`{"policy":"api","key":"${MARK}`), Buffer.from(bytes), Buffer.from('"}')]),
    );
  }
  // Random bytes, each with one 0xff somewhere (never UTF-8), and random mutations of valid JSON into wrong types.
  for (let i = 0; i < 1500; i++) {
    const bytes = Buffer.alloc(random.int(1, 2000));
    for (let j = 0; j < bytes.length; j++) bytes[j] = random.int(0, 255);
    bytes[random.int(0, bytes.length - 1)] = 0xff;
    bodies.push(bytes);
  }
  const wrong = ['0', '-3', '1.5', 'null', 'true', '[]', '{}', '""', `"${MARK}"`, '[[[[[[[[]]]]]]]]'];
  for (let i = 0; i < 1200; i++) {
    const field = random.pick(['policy', 'key', 'cost']);
    const fields: Record<string, string> = { policy: '"api"', key: `"k-${i}"`, cost: '1' };
    fields[field] = random.pick(
      field === 'cost' ? wrong : wrong.filter((value) => !value.startsWith('"') || value === '""'),
    );
    if (field === 'policy' && random.next() < 0.5)
      fields.policy = `"${random.pick(['apI', 'ap', 'api ', MARK])}"`;
    bodies.push(
      Buffer.from(
        `{${Object.entries(fields)
          .map(([k, v]) => `"${k}":${v}`)
          .join(',')}}`,
      ),
    );
  }
  return bodies;
}

async function startApi(): Promise<ServeProcess & { remove(): void }> {
  const config = writeConfig({
    policies: { api: { algorithm: 'tokenBucket', capacity: 100, refillPerSecond: 10 } },
  });
  return { ...(await startServe(['--config', config.path])), remove: config.remove };
}

describe('sluice serve under bad input', () => {
  let service: Awaited<ReturnType<typeof startApi>>;

  before(async () => {
    service = await startApi();
  });
  after(async () => {
    service.running.child.kill('SIGTERM');
    await service.running.exited;
    service.remove();
  });

  test('thousands of malformed bodies: each a 400 problem+json quoting at most a short prefix; no crash, no stack, a summary line instead of one per request', async () => {
    const bodies = malformedBodies();
    assert.ok(bodies.length > 3000, `${bodies.length} bodies`);
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    const started = Date.now();
    let next = 0;
    const wrongAnswers: string[] = [];
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < bodies.length) {
          const body = bodies[next++] as Buffer;
          const reply = await post(service.base, body, agent);
          const detail =
            reply.contentType === 'application/problem+json' ? JSON.parse(reply.body).detail : undefined;
          if (
            reply.status !== 400 ||
            typeof detail !== 'string' ||
            detail.length > 400 ||
            detail.includes('Z'.repeat(41)) ||
            JSON.parse(reply.body).status !== 400
          ) {
            wrongAnswers.push(
              `${reply.status} ${reply.body.slice(0, 300)} for ${body.toString().slice(0, 100)}`,
            );
          }
        }
      }),
    );
    agent.destroy();
    const elapsedMs = Date.now() - started;
    assert.deepEqual(wrongAnswers.slice(0, 5), [], `${wrongAnswers.length} wrong answers`);

    // Still answering, and nothing was counted for the refused requests.
    const fresh = await post(service.base, Buffer.from('{"policy":"api","key":"k-1"}'), new Agent());
    assert.equal(fresh.status, 200, fresh.body);
    assert.equal(JSON.parse(fresh.body).remaining, 99);

    service.running.child.kill('SIGTERM');
    const { code, stderr } = await service.running.exited;
    assert.equal(code, 0, stderr);
    assert.doesNotMatch(stderr, /\n\s+at |Maximum call stack|Error:/);
    const summaries: string[] =
      stderr.match(/^sluice serve: refused [\d,]+ malformed requests? in the last \d+ s \(.*\)$/gm) ?? [];
    // One line per 10 s at most while they came, and the last at shutdown.
    assert.ok(summaries.length >= 1 && summaries.length <= Math.ceil(elapsedMs / 10_000) + 1, stderr);
    const counted = summaries.reduce(
      (sum, line) => sum + Number(/refused ([\d,]+)/.exec(line)?.[1]?.replace(/,/g, '')),
      0,
    );
    assert.equal(counted, bodies.length);
    const otherLines = stderr.split('\n').filter((line) => line !== '' && !summaries.includes(line));
    assert.deepEqual(otherLines, ['sluice serve: SIGTERM: finishing requests in flight, then stopping']);
    service = await startApi();
  });

  test('connections reset by their clients, idle or in the middle of a request, count neither as malformed requests nor as the service failing; a malformed request still does', async () => {
    const port = Number(new URL(service.base).port);
    // Half of them say nothing; the others are reset in the middle of a request.
    const opened = await openHalfStarted(port, 40);
    // Every connection reached the server (a request on a fresh one is answered after they were opened).
    assert.equal(
      (await post(service.base, Buffer.from('{"policy":"api","key":"before-reset"}'), new Agent())).status,
      200,
    );
    for (const socket of opened) socket.resetAndDestroy();
    const malformed = await post(service.base, Buffer.from('not json'), new Agent());
    assert.equal(malformed.status, 400);
    // The resets have reached the server once a request sent after them is answered.
    assert.equal(
      (await post(service.base, Buffer.from('{"policy":"api","key":"after-reset"}'), new Agent())).status,
      200,
    );
    service.running.child.kill('SIGTERM');
    const { code, stderr } = await service.running.exited;
    assert.equal(code, 0, stderr);
    // One malformed request refused; nothing about the resets, neither as refused nor as failed in the service.
    assert.deepEqual(
      stderr
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => line.replace(/in the last \d+ s/, 'in the last N s')),
      [
        'sluice serve: SIGTERM: finishing requests in flight, then stopping',
        'sluice serve: refused 1 malformed request in the last N s (1 x 400)',
      ],
    );
    service = await startApi();
  });

  test('1,500 half-open connections held: a normal request still gets its answer', async () => {
    const limit = Number(execFileSync('bash', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim());
    assert.ok(
      limit >= 3200 || Number.isNaN(limit),
      `the open-files limit is ${limit}: raise it (ulimit -n 4096)`,
    );
    const port = Number(new URL(service.base).port);
    const sockets: Socket[] = [];
    let closedEarly = 0;
    try {
      const opening = openHalfStarted(port, 1500, sockets);
      for (const socket of sockets) socket.on('close', () => closedEarly++);
      await opening;
      const reply = await post(service.base, Buffer.from('{"policy":"api","key":"while-held"}'), new Agent());
      assert.equal(reply.status, 200, reply.body);
      assert.equal(JSON.parse(reply.body).allowed, true);
      assert.equal(closedEarly, 0, 'every held connection was still open when the answer came');
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });
});
