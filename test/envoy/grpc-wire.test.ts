// The gRPC edges of the service, spoken raw over node:http2 to a real `sluice serve --envoy`: what is not a call of
// its methods is answered as the gRPC protocol says (UNIMPLEMENTED, 415), a compressed or cut-short message is
// refused without being decoded, an error's message is percent-encoded, and an answer is one message then the trailers.
import assert from 'node:assert/strict';
import { type ClientHttp2Session, connect, type IncomingHttpHeaders } from 'node:http2';
import { after, before, describe, test } from 'node:test';
import { configDir, type EnvoyServe, startEnvoyServe } from '../helpers/envoy/support.js';

const CONFIG = configDir({
  'wire.yaml': `domain: wire
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 10
`,
});

const METHOD = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** A RateLimitRequest { domain: "wire", descriptors: [{ entries: [{ key: "user", value }] }] }, encoded by hand. */
function requestMessage(domain: string, value: string): Buffer {
  const field = (number: number, bytes: Buffer): Buffer =>
    Buffer.concat([Buffer.from([(number << 3) | 2, bytes.length]), bytes]);
  const entry = Buffer.concat([field(1, Buffer.from('user')), field(2, Buffer.from(value))]);
  return Buffer.concat([field(1, Buffer.from(domain)), field(2, field(1, entry))]);
}

function framed(message: Buffer, compressed = 0): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = compressed;
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

interface Exchange {
  readonly headers: IncomingHttpHeaders;
  readonly trailers: IncomingHttpHeaders;
  readonly body: Buffer;
}

function exchange(
  session: ClientHttp2Session,
  path: string,
  body: Buffer,
  contentType = 'application/grpc',
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': contentType,
      te: 'trailers',
    });
    let headers: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on('response', (received) => {
      headers = received;
    });
    stream.on('trailers', (received) => {
      trailers = received;
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve({ headers, trailers, body: Buffer.concat(chunks) }));
    stream.on('error', reject);
    stream.end(body);
  });
}

/** The status of a call: in the trailers, or in the headers of a trailers-only answer. */
function grpcStatus(answer: Exchange): string | undefined {
  return (answer.trailers['grpc-status'] ?? answer.headers['grpc-status']) as string | undefined;
}

describe('gRPC over HTTP/2, raw', () => {
  let serve: EnvoyServe;
  let session: ClientHttp2Session;
  before(async () => {
    serve = await startEnvoyServe(CONFIG);
    session = connect(`http://${serve.grpc}`);
  });
  after(async () => {
    session.close();
    await serve.stop();
  });

  test('a call: 200, one framed message, then grpc-status 0 in the trailers', async () => {
    const answer = await exchange(session, METHOD, framed(requestMessage('wire', 'a')));
    assert.equal(answer.headers[':status'], 200);
    assert.match(String(answer.headers['content-type']), /^application\/grpc/);
    assert.equal(answer.trailers['grpc-status'], '0');
    assert.equal(answer.body[0], 0, 'not compressed');
    assert.equal(answer.body.readUInt32BE(1), answer.body.length - 5, 'one whole message');
    // overall_code (field 1, varint) is OK (1).
    assert.deepEqual([...answer.body.subarray(5, 7)], [0x08, 0x01]);
  });

  test('an unknown method: UNIMPLEMENTED (12), with nothing decided', async () => {
    const answer = await exchange(
      session,
      '/envoy.service.ratelimit.v3.RateLimitService/Nope',
      framed(requestMessage('wire', 'b')),
    );
    assert.equal(grpcStatus(answer), '12');
    assert.equal(answer.body.length, 0);
  });

  test('not gRPC: HTTP 415', async () => {
    const answer = await exchange(session, METHOD, Buffer.from('{}'), 'application/json');
    assert.equal(answer.headers[':status'], 415);
  });

  test('a compressed message: UNIMPLEMENTED, not decoded, and the service still answers the next call', async () => {
    const answer = await exchange(session, METHOD, framed(requestMessage('wire', 'c'), 1));
    assert.equal(grpcStatus(answer), '12');
    assert.equal(grpcStatus(await exchange(session, METHOD, framed(requestMessage('wire', 'c')))), '0');
  });

  test('a message cut short, and a body with two messages: refused, each with its own status', async () => {
    const whole = framed(requestMessage('wire', 'd'));
    assert.equal(grpcStatus(await exchange(session, METHOD, whole.subarray(0, whole.length - 3))), '13');
    assert.equal(grpcStatus(await exchange(session, METHOD, Buffer.concat([whole, whole]))), '12');
    assert.equal(grpcStatus(await exchange(session, METHOD, Buffer.alloc(0))), '13');
  });

  test("a refusal's message is percent-encoded (grpc-message), its status INVALID_ARGUMENT", async () => {
    const answer = await exchange(session, METHOD, framed(requestMessage('', 'e')));
    assert.equal(grpcStatus(answer), '3');
    const message = String(answer.headers['grpc-message'] ?? answer.trailers['grpc-message']);
    assert.ok(message.length > 0);
    assert.doesNotMatch(message, /[^\x20-\x7e]/, 'printable ASCII only');
    assert.doesNotThrow(() => decodeURIComponent(message));
  });
});
