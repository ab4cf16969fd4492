// A proxy of a streaming LLM API that limits tokens per user: 100 reserved before each answer, the
// usage its last event reports settled once the stream has ended (charged past the limit, into debt).
// A client that hangs up stops the upstream, and pays for the tokens streamed until then.
// It starts a small upstream of its own (streamed answers of `max_tokens` tokens) unless UPSTREAM_URL is set.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { Redis } from 'ioredis';
import { createLimiter, RedisStore, tokenBucket } from 'sluice';
import { headerKey, rateLimit } from 'sluice/express';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});

// 1000 tokens a minute per user. A user may owe up to a minute's worth; its requests wait until paid.
// An answer takes seconds, so the store may take up to 500 ms (the default is 50): a usage charge
// that times out is reported, not recorded, and the user's count stays short by it.
const store = new RedisStore({ client: redis });
await store.ready(); // connected, and the scripts loaded: the first answer does not load them
const tokens = createLimiter({
  store,
  policy: tokenBucket({ capacity: 1000, refillPerSecond: 1000 / 60, unit: 'tokens' }),
  name: 'tokens',
  timeoutMs: 500,
});
const ESTIMATE = 100;

/** What an event line reports: the `total_tokens` of the usage event, and the tokens of a delta (about one each). */
function readEvent(line: string): { usage: number | undefined; tokens: number } {
  if (!line.startsWith('data: {')) return { usage: undefined, tokens: 0 };
  const event = JSON.parse(line.slice(6)) as {
    choices?: Array<{ delta?: { content?: string } }>;
    usage?: { total_tokens?: number } | null;
  };
  const tokens = event.choices?.some((choice) => choice.delta?.content) ? 1 : 0;
  return { usage: event.usage?.total_tokens ?? undefined, tokens };
}

/** A stand-in for an LLM API: streams `max_tokens` words, then the usage, then [DONE]. */
async function startUpstream(): Promise<string> {
  const upstream = express().use(express.json());
  upstream.post('/v1/chat/completions', async (req, res) => {
    const total = Number(req.body.max_tokens ?? 300);
    res.type('text/event-stream');
    for (let i = 0; i < 3; i++) {
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'word ' } }] })}\n\n`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const usage = { prompt_tokens: 10, completion_tokens: total - 10, total_tokens: total };
    res.write(`data: ${JSON.stringify({ choices: [], usage })}\n\n`);
    res.end('data: [DONE]\n\n');
  });
  const server = createServer(upstream);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const upstreamUrl = process.env.UPSTREAM_URL ?? (await startUpstream());

const app = express();
app.use(express.json());
app.post(
  '/v1/chat/completions',
  rateLimit({
    limiter: tokens,
    key: headerKey('x-user'),
    cost: ESTIMATE,
    // The usage the upstream reported; when the client hung up before it came, the tokens streamed
    // until then (the estimate at least: the prompt was read too).
    settle: (_req, res) => res.locals.usage ?? Math.max(ESTIMATE, res.locals.streamed ?? 0),
    // Usage the store did not record: the user was served it without paying.
    onRefundError: (error) => console.error('usage not charged:', error),
  }),
  async (req, res) => {
    // A client that goes away stops the upstream: tokens nobody reads are not generated, nor paid for.
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    res.locals.streamed = 0;
    try {
      const upstream = await fetch(`${upstreamUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...req.body, stream: true, stream_options: { include_usage: true } }),
        signal: gone.signal,
      });
      res.status(upstream.status).type('text/event-stream');
      const decoder = new TextDecoder();
      let pending = '';
      for await (const chunk of upstream.body ?? []) {
        res.write(chunk);
        pending += decoder.decode(chunk, { stream: true });
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) {
          const { usage, tokens } = readEvent(line);
          res.locals.streamed += tokens;
          res.locals.usage = usage ?? res.locals.usage;
        }
      }
      res.end();
    } catch (error) {
      // The client went away: the settle already charged what was streamed.
      if (!gone.signal.aborted) throw error;
    }
  },
);
// What a user has left, and how long it waits while it owes.
app.get('/v1/quota', async (req, res) => {
  const decision = await tokens.peek(req.get('x-user') ?? '(unknown)');
  res.json({ remaining: decision.remaining, retryAfterMs: decision.retryAfterMs });
});

const port = Number(process.env.PORT ?? 3000);
app.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
