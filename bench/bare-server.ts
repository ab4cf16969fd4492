// The floor of the HTTP service: a bare node:http server that reads each request's body and answers
// with a fixed status, headers and JSON body (those `sluice serve` gave one request), deciding nothing.
//   node build/bench/bare-server.js '<{"status":200,"headers":{...},"body":"..."} as JSON>'
// Prints `listening <port>` once it listens on 127.0.0.1 (a free port).
import { createServer } from 'node:http';

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
    response.end(body);
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address !== null ? address.port : 0}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
