// The floor of the HTTP service: a bare node:http server that reads each request's body and answers
// with a fixed status, headers and JSON body (those `sluice serve` gave one request), deciding nothing.
//   node build/bench/bare-server.js '<{"status":200,"headers":{...},"body":"..."} as JSON>' [--at-turn-end]
// --at-turn-end writes the answers of a turn of the event loop together in its check phase, as
// `sluice serve` does, rather than each as its body ends: the floor for that way of writing.
// Prints `listening <port>` once it listens on 127.0.0.1 (a free port).
import { createServer, type ServerResponse } from 'node:http';

interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

const answer = JSON.parse(process.argv[2] ?? '{}') as Answer;
const body = Buffer.from(answer.body);
const headers = Object.entries(answer.headers);

const server = createServer((request, response) => {
  // Read the body as the service does (chunks, then one string), and ignore it.
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    Buffer.concat(chunks).toString('utf8');
    response.statusCode = answer.status;
    for (const [name, value] of headers) response.setHeader(name, value);
    response.setHeader('Content-Length', body.length);
    if (!AT_TURN_END) response.end(body);
    else {
      if (pending.length === 0) setImmediate(endPending);
      pending.push(response);
    }
  });
});

const AT_TURN_END = process.argv[3] === '--at-turn-end';
const pending: ServerResponse[] = [];
function endPending(): void {
  for (const response of pending) response.end(body);
  pending.length = 0;
}
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address !== null ? address.port : 0}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
