// A worker process calling a local upstream at a shared pace: through sluice's throttle().fetch, a
// polling loop on limit(), or Bottleneck's Redis clustering (the benchmark's comparison). Forked by the
// throttle suites and the benchmark: prepare -> ready, go -> report.
import { Redis } from 'ioredis';
import {
  createLimiter,
  gcra,
  type Limiter,
  RedisStore,
  type Store,
  type StoreReply,
} from '../../src/index.js';
import { throttle } from '../../src/throttle/index.js';
import { epochNow } from './upstream.js';

export interface WorkerConfig {
  readonly mode: 'throttle' | 'poll' | 'bottleneck';
  readonly redisPort: number;
  readonly url: string;
  /** Sent as `x-worker`, so the upstream's log says who called. */
  readonly worker: string;
  readonly jobs: number;
  /** The limiter's name (Bottleneck's id): workers that share it share the pace. */
  readonly name: string;
  readonly perSecond: number;
  readonly retries?: number;
}

export interface WorkerReport {
  readonly statuses: Record<string, number>;
  readonly errors: readonly string[];
  readonly elapsedMs: number;
  /**
   * When this process first read a store answer saying a pause holds (ms since the epoch, the
   * clock of `x-sent-at`): from then on it must hand nothing to fetch until the pause ends.
   */
  readonly learnedPauseAtMs: number | undefined;
}

let learnedPauseAtMs: number | undefined;

/** The store, with every schedule's answer read on its way back for the pause it reports (its second field). */
function watched(store: RedisStore): Store {
  const noted = (result: { readonly fields?: readonly number[] | undefined }): void => {
    // Once the callbacks this read sets off have run: answers read together are handed to the
    // throttle together, and an earlier one (no pause yet) may clear slots whose calls go then.
    if ((result.fields?.[1] ?? 0) > 0) setImmediate(() => (learnedPauseAtMs ??= epochNow()));
  };
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'submit') {
        return (requests: Parameters<RedisStore['submit']>[0], reply: StoreReply, together?: never) =>
          target.submit(
            requests,
            {
              answered: (request, result) => {
                noted(result);
                reply.answered(request, result);
              },
              failed: (request, error) => reply.failed(request, error),
            },
            together,
          );
      }
      if (property === 'decide') {
        return async (request: Parameters<RedisStore['decide']>[0]) => {
          const result = await target.decide(request);
          noted(result);
          return result;
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

type Job = () => Promise<Response>;

/** fetch, stamped with who sent the call and when (the upstream logs both). */
function stamped(worker: string): typeof fetch {
  return (input, init) =>
    fetch(input, { ...init, headers: { 'x-worker': worker, 'x-sent-at': String(epochNow()) } });
}

function paced(config: WorkerConfig, client: Redis): Limiter {
  const store = watched(new RedisStore({ client }));
  // A burst of one: the pace is even from the first call, as a strict upstream wants it.
  const policy = gcra({ limit: config.perSecond, periodMs: 1000, burst: 1 });
  // However slow this shared machine is, every decision comes from Redis: the runs compare store calls.
  return createLimiter({ store, policy, name: config.name, timeoutMs: 30_000 });
}

async function prepare(config: WorkerConfig): Promise<{ job: Job; close: () => Promise<void> }> {
  const send = stamped(config.worker);
  if (config.mode === 'bottleneck') {
    // Loaded here only: the suites never run this mode, and Bottleneck is a devDependency of the benchmark.
    const { default: Bottleneck } = await import('bottleneck');
    const limiter = new Bottleneck({
      id: config.name,
      datastore: 'ioredis',
      clientOptions: { port: config.redisPort, host: '127.0.0.1' },
      minTime: 1000 / config.perSecond,
      maxConcurrent: null,
    });
    await limiter.ready();
    return {
      job: () => limiter.schedule(() => send(config.url)),
      close: () => limiter.disconnect(true),
    };
  }
  const client = new Redis({ port: config.redisPort, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  const limiter = paced(config, client);
  if (config.mode === 'poll') {
    const job = async (): Promise<Response> => {
      for (;;) {
        const decision = await limiter.limit('upstream');
        if (decision.allowed) return send(config.url);
        await new Promise((resolve) => setTimeout(resolve, decision.retryAfterMs));
      }
    };
    return { job, close: async () => void (await client.quit()) };
  }
  const calls = throttle({ limiter, key: 'upstream', retries: config.retries ?? 2, fetch: send });
  return { job: () => calls.fetch(config.url), close: async () => void (await client.quit()) };
}

async function fire(config: WorkerConfig, job: Job): Promise<WorkerReport> {
  const started = performance.now();
  const statuses: Record<string, number> = {};
  const errors: string[] = [];
  await Promise.all(
    Array.from({ length: config.jobs }, async () => {
      try {
        const response = await job();
        await response.arrayBuffer();
        statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      } catch (error) {
        errors.push(error instanceof Error ? error.message : String(error));
      }
    }),
  );
  return { statuses, errors, elapsedMs: performance.now() - started, learnedPauseAtMs };
}

type Message = { type: 'prepare'; config: WorkerConfig } | { type: 'go' } | { type: 'exit' };

function main(): void {
  let config: WorkerConfig | undefined;
  let prepared: { job: Job; close: () => Promise<void> } | undefined;
  process.on('message', async (message: Message) => {
    if (message.type === 'prepare') {
      config = message.config;
      prepared = await prepare(config);
      process.send?.({ ready: true });
    } else if (message.type === 'go' && config !== undefined && prepared !== undefined) {
      process.send?.({ report: await fire(config, prepared.job) });
    } else if (message.type === 'exit') {
      await prepared?.close();
      process.exit(0);
    }
  });
  process.send?.({ started: true });
}

main();
