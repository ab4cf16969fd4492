// A local upstream that enforces N requests per second strictly and records every arrival, for the
// throttle's suites and the benchmark: what a rate-limited partner API looks like from the caller's side.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

/** One request as the upstream saw it. */
export interface Arrival {
  /** When it arrived, in ms since the epoch with fractions (the machine's clock, as Redis's TIME). */
  readonly atMs: number;
  readonly status: number;
  /** The `x-worker` header: which process sent it. */
  readonly worker: string;
  /** The `x-sent-at` header, when the sender stamped it: when it was handed to fetch, in ms since the epoch. */
  readonly sentAtMs: number | undefined;
}

export interface UpstreamOptions {
  /** Requests accepted in any 1000 ms; more are answered 429 with `Retry-After: 1`. */
  readonly perSecond: number;
  /** Answers the n-th arrival (from 1) with 429 and `Retry-After: <seconds>`, once. */
  readonly refuse?: { readonly arrival: number; readonly retryAfterSeconds: number };
}

export interface Upstream {
  readonly url: string;
  readonly arrivals: readonly Arrival[];
  close(): Promise<void>;
}

/** The time now in ms since the epoch, with fractions: the clock both the upstream and the senders stamp. */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Starts the upstream on a free loopback port. */
export function startUpstream(options: UpstreamOptions): Promise<Upstream> {
  const arrivals: Arrival[] = [];
  // Accepted arrivals' times, oldest first: a sliding log, exactly as strict as "per second" says.
  const accepted: number[] = [];
  let head = 0;
  const answer = (request: IncomingMessage, response: ServerResponse): void => {
    const atMs = epochNow();
    while (head < accepted.length && (accepted[head] as number) <= atMs - 1000) head++;
    const refuseNow = options.refuse !== undefined && arrivals.length + 1 === options.refuse.arrival;
    const full = accepted.length - head >= options.perSecond;
    const status = refuseNow || full ? 429 : 200;
    const sent = request.headers['x-sent-at'];
    arrivals.push({
      atMs,
      status,
      worker: String(request.headers['x-worker'] ?? ''),
      sentAtMs: typeof sent === 'string' ? Number(sent) : undefined,
    });
    request.resume();
    if (status === 200) {
      accepted.push(atMs);
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    const seconds = refuseNow ? (options.refuse?.retryAfterSeconds ?? 1) : 1;
    response
      .writeHead(429, { 'retry-after': String(seconds), 'content-type': 'text/plain' })
      .end('slow down');
  };
  const server = createServer(answer);
  // Keep-alive connections from six processes: more than the default backlog needs, fewer than its limits.
  server.keepAliveTimeout = 10_000;
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/`,
        arrivals,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/** The most arrivals any span of `spanMs` holds (spans starting at an arrival). */
export function busiestSpan(arrivals: readonly Arrival[], spanMs = 1000): number {
  const times = arrivals.map((arrival) => arrival.atMs).sort((a, b) => a - b);
  let most = 0;
  let start = 0;
  for (let end = 0; end < times.length; end++) {
    while ((times[end] as number) - (times[start] as number) >= spanMs) start++;
    most = Math.max(most, end - start + 1);
  }
  return most;
}
