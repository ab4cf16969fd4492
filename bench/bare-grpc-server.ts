// The floor of the gRPC service: a bare node:http2 server that reads each call's body and answers
// with one constant ShouldRateLimit response frame and the OK trailers, deciding nothing; the same
// headers, framing and trailers as `sluice serve --envoy` writes.
//   node build/bench/bare-grpc-server.js <the response message, base64> [--at-turn-end]
// --at-turn-end answers the calls of a turn of the event loop together in its check phase, as
// `sluice serve` does, rather than each as its body ends: the floor for that way of writing.
// Prints `listening <port>` once it listens on 127.0.0.1 (a free port).
import { constants, createServer, type ServerHttp2Stream } from 'node:http2';

const message = Buffer.from(process.argv[2] ?? '', 'base64');
const framed = Buffer.allocUnsafe(5 + message.length);
framed[0] = 0;
framed.writeUInt32BE(message.length, 1);
framed.set(message, 5);

const HEADERS = {
  [constants.HTTP2_HEADER_STATUS]: 200,
  [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc+proto',
  'grpc-accept-encoding': 'identity',
};
const TRAILERS = { 'grpc-status': '0' };

const server = createServer({ maxSessionMemory: 64 });
server.on('stream', (stream) => {
  stream.on('error', () => {});
  // Read the body as the service does (its chunks, kept), and ignore it.
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  stream.once('end', () => {
    if (!AT_TURN_END) answer(stream);
    else {
      if (pending.length === 0) setImmediate(answerPending);
      pending.push(stream);
    }
  });
});

function answer(stream: ServerHttp2Stream): void {
  if (stream.destroyed) return;
  stream.respond(HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(TRAILERS));
  // A copy per call, as the service frames each answer anew.
  stream.end(Buffer.from(framed));
}

const AT_TURN_END = process.argv[3] === '--at-turn-end';
const pending: ServerHttp2Stream[] = [];
function answerPending(): void {
  for (const stream of pending) answer(stream);
  pending.length = 0;
}
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address !== null ? address.port : 0}\n`);
});
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 500).unref();
});
