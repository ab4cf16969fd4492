// One process of `sluice verify`: its own connection, firing its share of requests when the parent says go.
import { createLimiter, RedisStore } from 'sluice';
import { policyFromSpec } from './config.js';
import { errorText } from './errors.js';
import { type Connection, connect } from './redis.js';

/** The hidden argument that makes the CLI run as a verify worker (forked by `sluice verify`). */
export const VERIFY_WORKER = '__verify-worker';

/** The limiters verify runs: sluice's, and two broken ones that show the race its scripts prevent. */
export type RoundKind = 'sluice' | 'get-incr' | 'multi-exec';

export type ToWorker =
  | { readonly type: 'init'; readonly url: string; readonly timeoutMs: number }
  | {
      readonly type: 'prepare';
      readonly kind: RoundKind;
      /** `{ algorithm, ...options }` for sluice rounds. */
      readonly policy?: Record<string, unknown>;
      readonly prefix: string;
      readonly name: string;
      /** The key the naive limiters count in. */
      readonly key: string;
      readonly parallel: number;
      readonly limit: number;
      readonly ttlMs: number;
    }
  | { readonly type: 'go' };

export type FromWorker =
  | { readonly type: 'connected' }
  | { readonly type: 'ready' }
  | {
      readonly type: 'done';
      readonly allowed: number;
      readonly denied: number;
      readonly errors: number;
      readonly error?: string;
    }
  | { readonly type: 'failed'; readonly message: string };

/** The identifier every request of a round asks for: all of them race for one key. */
export const VERIFY_IDENTIFIER = 'check';

type Request = () => Promise<boolean>;

function prepare(connection: Connection, message: Extract<ToWorker, { type: 'prepare' }>): Promise<Request> {
  const redis = connection.client;
  const { key, limit, ttlMs } = message;
  if (message.kind === 'get-incr') {
    // The naive limiter: read, decide, then write, in separate round trips.
    return Promise.resolve(async () => {
      const count = Number((await redis.get(key)) ?? 0);
      if (count >= limit) return false;
      await redis.incr(key);
      await redis.pexpire(key, ttlMs);
      return true;
    });
  }
  if (message.kind === 'multi-exec') {
    // "MULTI makes check-then-increment safe": the read cannot happen inside the transaction, so
    // the decision is still taken on a stale count. WATCH (or a script) is what would make it safe.
    return Promise.resolve(async () => {
      const count = Number((await redis.get(key)) ?? 0);
      if (count >= limit) return false;
      await redis.multi().incr(key).pexpire(key, ttlMs).exec();
      return true;
    });
  }
  // maxBatch 1: every request is its own script call, as in a check of one request per call, rather than one
  // coalesced call per process that would be atomic for a simpler reason.
  const store = new RedisStore({ client: redis, prefix: message.prefix, maxBatch: 1 });
  // verify judges the scripts, not the failure policy: a reply is waited for, and a decision made
  // without Redis (a timeout, an error) counts as a refusal, which shows as "not exact".
  const limiter = createLimiter({
    store,
    policy: policyFromSpec('verify policy', message.policy),
    name: message.name,
    timeoutMs: 60_000,
    onStoreError: 'deny',
  });
  // A peek loads the script (NOSCRIPT, then EVAL) before the race, and writes nothing.
  return limiter.peek('warm-up').then(() => async () => (await limiter.limit(VERIFY_IDENTIFIER)).allowed);
}

/** Runs until the parent disconnects. */
export function runVerifyWorker(): Promise<number> {
  const send = process.send?.bind(process);
  if (send === undefined) {
    process.stderr.write('sluice: this command is started by `sluice verify`, not by hand.\n');
    return Promise.resolve(2);
  }
  const reply = (message: FromWorker): void => {
    send(message);
  };
  // Ctrl-C reaches the whole process group: the parent decides when workers stop and cleans up.
  process.on('SIGINT', () => {});
  const state: WorkerState = { connection: undefined, request: undefined, parallel: 0 };
  return new Promise((resolve) => {
    process.on('disconnect', () => {
      const closing = state.connection?.close() ?? Promise.resolve();
      closing.then(
        () => resolve(0),
        () => resolve(0),
      );
    });
    process.on('message', (message: ToWorker) => handle(state, message, reply));
  });
}

/** What a worker holds between the parent's messages. */
interface WorkerState {
  connection: Connection | undefined;
  /** The round it is ready to fire, once prepared. */
  request: Request | undefined;
  parallel: number;
}

function handle(state: WorkerState, message: ToWorker, reply: (message: FromWorker) => void): void {
  const failed = (error: unknown): void => reply({ type: 'failed', message: errorText(error) });
  if (message.type === 'init') {
    connect(message.url, message.timeoutMs).then((opened) => {
      state.connection = opened;
      reply({ type: 'connected' });
    }, failed);
  } else if (message.type === 'prepare' && state.connection !== undefined) {
    state.parallel = message.parallel;
    prepare(state.connection, message).then((ready) => {
      state.request = ready;
      reply({ type: 'ready' });
    }, failed);
  } else if (message.type === 'go' && state.request !== undefined) {
    fire(state.request, state.parallel).then(reply);
  }
}

/** Fires `parallel` requests at once and counts what they answered. */
async function fire(request: Request, parallel: number): Promise<FromWorker> {
  const results = await Promise.allSettled(Array.from({ length: parallel }, () => request()));
  let allowed = 0;
  let denied = 0;
  let errors = 0;
  let error: string | undefined;
  for (const result of results) {
    if (result.status === 'rejected') {
      errors++;
      error ??= errorText(result.reason);
    } else if (result.value) allowed++;
    else denied++;
  }
  return error === undefined
    ? { type: 'done', allowed, denied, errors }
    : { type: 'done', allowed, denied, errors, error };
}
