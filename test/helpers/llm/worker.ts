// One of the LLM scenario's processes: a proxy of the streaming upstream behind a limiter of tokens
// on the shared Redis, and the clients that call it all at once. Run by scenario.ts with fork().
import { createServer, get, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { rateLimit } from '../../../src/http/adapters/node.js';
import { headerKey } from '../../../src/http/index.js';
import { createLimiter, type Limiter, RedisStore } from '../../../src/index.js';
import { decisionMetrics } from '../../../src/metrics/index.js';
import { ESTIMATE, type Outcome, policy, type Task, USER, usageIn, type Variant } from './shared.js';

/**
 * Streams the upstream's answer to `response` as it arrives, and reports the usage its final event
 * states (what an OpenAI-compatible stream sends last with `stream_options.include_usage`).
 */
function proxy(upstream: string, response: ServerResponse, onUsage: (tokens: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    get(upstream, (answer) => {
      response.writeHead(200, { 'Content-Type': 'text/event-stream' });
      let text = '';
      answer.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        response.write(chunk);
      });
      answer.on('end', () => {
        onUsage(usageIn(text) ?? ESTIMATE);
        response.end();
        resolve();
      });
      answer.on('error', reject);
    }).on('error', reject);
  });
}

/** What the proxy counted after responses: usage a refused charge dropped, and the calls made after the response. */
interface After {
  dropped: number;
  done: number;
}

/** The proxy of one variant: sluice's reserve and settle, the estimate alone, or a charge refused past the limit. */
function proxyServer(variant: Variant, limiter: Limiter, upstream: string, after: After): Server {
  if (variant === 'charge-only') {
    return createServer(async (_request, response) => {
      // Admitted while anything is left; the usage taken afterwards, all or (refused) nothing.
      if (!(await limiter.peek(USER)).allowed) {
        response.writeHead(429).end();
        return;
      }
      let tokens = 0;
      await proxy(upstream, response, (used) => {
        tokens = used;
      });
      const counted = await limiter.limit(USER, { cost: Math.min(tokens, limiter.policy.maxCost) });
      if (!counted.allowed) after.dropped += tokens;
      after.done++;
    });
  }
  // The middleware: the estimate taken before the handler; with `settle`, the usage the stream reported.
  const usage = new WeakMap<ServerResponse, number>();
  const guard = rateLimit({
    limiter,
    key: headerKey('x-user'),
    cost: ESTIMATE,
    headers: false,
    ...(variant === 'settle'
      ? { settle: (_: IncomingMessage, response: ServerResponse) => usage.get(response) ?? ESTIMATE }
      : {}),
  });
  return createServer(
    guard.wrap((_request, response) => proxy(upstream, response, (tokens) => usage.set(response, tokens))),
  );
}

/** One client's call: the status, and the usage the stream it received reported. */
function call(url: string): Promise<{ status: number; tokens: number }> {
  return new Promise((resolve, reject) => {
    get(url, { headers: { 'x-user': USER } }, (answer) => {
      let text = '';
      answer.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      answer.on('end', () => resolve({ status: answer.statusCode ?? 0, tokens: usageIn(text) ?? 0 }));
      answer.on('error', reject);
    }).on('error', reject);
  });
}

let redis: Redis | undefined;
let running: { server: Server; url: string; task: Task; after: After } | undefined;
const metrics = decisionMetrics();

/** Prepares a task: the limiter (its scripts loaded on a key of its own), the proxy listening. */
async function prepare(task: Task): Promise<void> {
  redis ??= new Redis({
    port: task.redisPort,
    host: '127.0.0.1',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
  });
  const clock = task.t0 === undefined ? {} : { clock: () => task.t0 as number };
  const after: After = { dropped: 0, done: 0 };
  const limiter = createLimiter({
    store: new RedisStore({ client: redis, connectTimeoutMs: 20_000 }),
    policy: policy(),
    name: task.name,
    timeoutMs: 20_000,
    metrics,
    // A settle's refund or charge, made once its response finished.
    onDecision: (_decision, context) => {
      if (context.operation === 'charge' || context.operation === 'refund') after.done++;
    },
    ...clock,
  });
  await limiter.peek('warm-up');
  const server = proxyServer(task.variant, limiter, task.upstream, after);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
  running = { server, url, task, after };
}

/** The calls the store gets after the responses: a settle's whenever usage differs from the estimate, the charge-only proxy's always. */
function expectedAfter(variant: Variant, calls: readonly { status: number; tokens: number }[]): number {
  const admitted = calls.filter((c) => c.status === 200);
  if (variant === 'charge-only') return admitted.length;
  if (variant === 'settle') return admitted.filter((c) => c.tokens !== ESTIMATE).length;
  return 0;
}

/** Runs a prepared task: every client at once, then what each got. */
async function go(): Promise<Outcome> {
  const { server, url, task, after } = running as NonNullable<typeof running>;
  const calls = await Promise.all(Array.from({ length: task.requests }, () => call(url)));
  // What is counted after a response runs once it has finished, after the client read its end:
  // counted, not timed (a bound of 20 s only keeps a broken run from hanging).
  const expected = expectedAfter(task.variant, calls);
  for (let waited = 0; after.done < expected; waited += 5) {
    if (waited > 20_000) throw new Error(`${after.done} of ${expected} calls after the responses`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  server.close();
  const cutOff = metrics.snapshot().find((tally) => tally.limiter === task.name)?.charges.cutOff ?? 0;
  return { calls, cutOff, dropped: after.dropped };
}

process.on('message', (message: { readonly prepare?: Task; readonly go?: true; readonly exit?: true }) => {
  const step =
    message.prepare !== undefined ? prepare(message.prepare).then(() => ({ ready: true })) : undefined;
  const answer = step ?? (message.go === true ? go().then((outcome) => ({ outcome })) : undefined);
  if (message.exit === true) {
    redis?.disconnect();
    process.exit(0);
  }
  answer?.then(
    (reply) => process.send?.(reply),
    (error: unknown) => process.send?.({ error: String(error) }),
  );
});
process.send?.({ started: true });
