// The Redis store: one script call per batch of decisions, each key decided atomically on the server.
import { ERROR_CODES, invalidOption, SluiceError } from '../../errors.js';
import { stateKey } from '../../keys.js';
import {
  OPERATION_CODE,
  type Operation,
  type Policy,
  type Store,
  type StoreRequest,
  type StoreResult,
} from '../../types.js';
import { keyPart, knownKeys, optionsObject, positiveInteger } from '../../validate.js';
import { atomicRequestsError } from '../atomic.js';
import { type Commander, toCommander } from './adapters.js';
import { warnAboutClientSettings } from './client-settings.js';
import { LIBRARY_CODE, SCRIPTS, type Script } from './scripts.js';
import { keySlot } from './slot.js';

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * An ioredis client (direct or through Sentinel) or Cluster, or a node-redis client, cluster
   * (`createCluster()`) or sentinel (`createSentinel()`), already configured.
   */
  readonly client: unknown;
  /**
   * First part of every key: `<prefix>:<limiter name>:{<identifier>}`.
   * @default 'rl'
   */
  readonly prefix?: string;
  /**
   * `scripts` sends EVALSHA (and the body once after NOSCRIPT); `functions` loads a versioned
   * library with FUNCTION LOAD and calls it with FCALL.
   * @default 'scripts'
   */
  readonly mode?: 'scripts' | 'functions';
  /**
   * Decisions that arrive in the same tick share one script call, up to this many keys (each still
   * decided atomically and on its own). 1 turns coalescing off. Smaller calls let the client
   * encode the next while Redis runs the last: with 200 decisions in flight, 32 to 64 keys per
   * call decided the most per second (BENCHMARKS.md), and each call stays well under a millisecond.
   * @default 64
   */
  readonly maxBatch?: number;
}

interface Pending {
  readonly request: StoreRequest;
  readonly key: string;
  readonly resolve: (result: StoreResult) => void;
  readonly reject: (error: unknown) => void;
}

interface Batch {
  readonly policy: Policy;
  readonly operation: Operation;
  readonly now: number | undefined;
  readonly items: Pending[];
  /** Work in the batch, for the log: one sorted-set insert per unit of cost plus four commands per key. */
  work: number;
  /** Sent (a batch may be sent before the flush ends, to keep a key's calls in order). */
  sent: boolean;
}

/** Whether a flush holds calls of more than one policy. */
function mixedPolicies(queue: readonly Pending[]): boolean {
  const first = queue[0]?.request.policy;
  for (const item of queue) if (item.request.policy !== first) return true;
  return false;
}

/**
 * The most log work one coalesced call may do: a log request costs about four commands and one
 * insert per unit, so a batch holds some fifty single-unit requests, and a request of cost 1000 goes
 * alone. Keeps every call within a few milliseconds of server time, out of SLOWLOG.
 */
const MAX_LOG_BATCH_WORK = 256;

const DEFAULTS = { prefix: 'rl', mode: 'scripts', maxBatch: 64 } as const;
/** FCALLs per batch when the server keeps losing the library (each after loading it again). */
const FUNCTION_TRIES = 3;
const COSTS = Array.from({ length: 101 }, (_, i) => String(i));

// ioredis Cluster wraps the reply that ends a run of redirections, e.g. when a replica promoted in
// a failover (it has no scripts) answers the last retry: the script still did not run.
const NOSCRIPT = /^(?:Too many Cluster redirections\. Last error: ReplyError: )?NOSCRIPT/;

function isNoScript(error: unknown): boolean {
  return error instanceof Error && NOSCRIPT.test(error.message);
}

const TRYAGAIN = /^(?:Too many Cluster redirections\. Last error: ReplyError: )?TRYAGAIN/;

function isTryAgain(error: unknown): boolean {
  return error instanceof Error && TRYAGAIN.test(error.message);
}

/** The items grouped by key, each group in arrival order. */
function byKey(items: readonly Pending[]): Pending[][] {
  const groups = new Map<string, Pending[]>();
  for (const item of items) {
    const group = groups.get(item.key);
    if (group === undefined) groups.set(item.key, [item]);
    else group.push(item);
  }
  return [...groups.values()];
}

/**
 * Keeps state in Redis, Valkey or Redis Cluster. Every decision is made by one Lua script (or
 * Redis Function) on the server, reading the server's clock unless the limiter brings its own.
 *
 * @example
 * import Redis from 'ioredis';
 * const store = new RedisStore({ client: new Redis(), prefix: 'rl' });
 */
export class RedisStore implements Store {
  readonly kind = 'redis';
  readonly prefix: string;
  readonly mode: 'scripts' | 'functions';
  readonly maxBatch: number;
  readonly #commander: Commander;
  #queue: Pending[] = [];
  #scheduled = false;
  #loading: Promise<void> | undefined;
  /** Commands sent so far, in the order the server runs them (one connection per node). */
  #sent = 0;
  /** `#sent` when the library load in flight was sent. */
  #loadingSentAt = 0;
  /** Script or function calls sent, for tests and the benchmark's accounting. */
  calls = 0;

  constructor(options: RedisStoreOptions) {
    const raw = optionsObject('RedisStore options', options, true);
    knownKeys('RedisStore', raw, ['client', 'prefix', 'mode', 'maxBatch']);
    this.#commander = toCommander(raw.client);
    warnAboutClientSettings(raw.client, this.#commander.client, this.#commander.cluster);
    this.prefix = raw.prefix === undefined ? DEFAULTS.prefix : keyPart('RedisStore.prefix', raw.prefix);
    if (raw.mode !== undefined && raw.mode !== 'scripts' && raw.mode !== 'functions') {
      throw invalidOption('RedisStore.mode', "'scripts' or 'functions'", raw.mode);
    }
    this.mode = raw.mode ?? DEFAULTS.mode;
    this.maxBatch =
      raw.maxBatch === undefined
        ? DEFAULTS.maxBatch
        : positiveInteger('RedisStore.maxBatch', raw.maxBatch, 1000);
  }

  /** Which client library and topology this store talks to. */
  get client(): { readonly library: 'ioredis' | 'node-redis'; readonly cluster: boolean } {
    return { library: this.#commander.client, cluster: this.#commander.cluster };
  }

  keyFor(name: string, identifier: string, tag?: string): string {
    return stateKey(this.prefix, name, identifier, tag);
  }

  decide(request: StoreRequest): Promise<StoreResult> {
    const key = stateKey(this.prefix, request.name, request.identifier, request.tag);
    return new Promise<StoreResult>((resolve, reject) => {
      this.#queue.push({ request, key, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        // After every promise continuation of this tick: decisions they start join the batch.
        process.nextTick(this.#flush);
      }
    });
  }

  /**
   * One call of the combined script (lua/all.lua) over every key: each is looked at, and `limit`
   * takes from all only when all allow. Not coalesced with other calls: one call per check.
   */
  decideAll(requests: readonly StoreRequest[]): Promise<StoreResult[]> {
    const keys = requests.map((r) => stateKey(this.prefix, r.name, r.identifier, r.tag));
    const invalid = atomicRequestsError(requests, keys);
    if (invalid !== undefined) return Promise.reject(invalid);
    const first = requests[0];
    const firstKey = keys[0];
    if (first === undefined || firstKey === undefined) return Promise.resolve([]);
    const count = requests.length;
    // Slots 0 and 1 are the command and the script's name; #run fills them.
    const args = [
      '',
      '',
      String(count),
      ...keys,
      OPERATION_CODE[first.operation],
      first.now === undefined ? '' : String(first.now),
    ];
    for (const request of requests) {
      const [firstParameter, secondParameter] = request.policy.args;
      args.push(request.policy.script, String(request.cost), firstParameter ?? '', secondParameter ?? '');
    }
    const script = SCRIPTS.all;
    return this.#run(script, args, firstKey).then(
      (reply) => {
        if (!Array.isArray(reply) || reply.length !== count * 4) {
          throw new SluiceError(
            ERROR_CODES.BAD_REPLY,
            `Expected ${count * 4} integers from the ${script.name} script, got ${Array.isArray(reply) ? `${reply.length} values` : typeof reply}.`,
          );
        }
        const results: StoreResult[] = [];
        for (let base = 0; base < reply.length; base += 4) {
          results.push({
            allowed: reply[base] === 1,
            remaining: Number(reply[base + 1]),
            resetMs: Number(reply[base + 2]),
            retryAfterMs: Number(reply[base + 3]),
          });
        }
        return results;
      },
      (error: unknown) => {
        throw storeError(error);
      },
    );
  }

  async reset(name: string, identifier: string, tag?: string): Promise<void> {
    const key = stateKey(this.prefix, name, identifier, tag);
    try {
      await this.#commander.send(['DEL', key], key);
    } catch (error) {
      throw storeError(error);
    }
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    const cluster = this.#commander.cluster;
    // One open batch per policy and slot (on a cluster only keys of one slot may share a call). A
    // request that cannot join it (another operation or time, or a full batch) sends it first, so
    // each key sees its requests in the order they were made.
    const open = new Map<Policy, Map<number, Batch>>();
    // Calls of one key under several policies (a per-call limit) must still run in order: a batch
    // holding an earlier call for the key is sent before the key's next call joins another.
    const lastBatch = mixedPolicies(queue) ? new Map<string, Batch>() : undefined;
    for (const item of queue) {
      const { policy, operation, now } = item.request;
      let bySlot = open.get(policy);
      if (bySlot === undefined) {
        bySlot = new Map();
        open.set(policy, bySlot);
      }
      const slot = cluster ? keySlot(item.key) : 0;
      let batch = bySlot.get(slot);
      if (
        batch === undefined ||
        batch.sent ||
        batch.operation !== operation ||
        batch.now !== now ||
        batch.items.length >= this.maxBatch ||
        (policy.script === 'sliding-log' && batch.work + item.request.cost + 4 > MAX_LOG_BATCH_WORK)
      ) {
        if (batch !== undefined && !batch.sent) this.#send(batch);
        batch = { policy, operation, now, items: [], work: 0, sent: false };
        bySlot.set(slot, batch);
      }
      if (lastBatch !== undefined) {
        const earlier = lastBatch.get(item.key);
        if (earlier !== undefined && earlier !== batch && !earlier.sent) this.#send(earlier);
        lastBatch.set(item.key, batch);
      }
      batch.items.push(item);
      batch.work += item.request.cost + 4;
    }
    for (const bySlot of open.values())
      for (const batch of bySlot.values()) if (!batch.sent) this.#send(batch);
  };

  #send(batch: Batch): void {
    batch.sent = true;
    const { items, policy } = batch;
    const script = SCRIPTS[policy.script];
    const count = items.length;
    const args: string[] = new Array(5 + count * 2 + policy.args.length);
    // Slots 0 and 1 are the command and the script's name; run() fills them.
    args[2] = String(count);
    let at = 3;
    for (const item of items) args[at++] = item.key;
    args[at++] = OPERATION_CODE[batch.operation];
    args[at++] = batch.now === undefined ? '' : String(batch.now);
    for (const arg of policy.args) args[at++] = arg;
    for (const item of items) {
      const cost = item.request.cost;
      args[at++] = cost < COSTS.length ? (COSTS[cost] as string) : String(cost);
    }
    this.#run(script, args, (items[0] as Pending).key).then(
      (reply) => {
        if (!Array.isArray(reply) || reply.length !== count * 4) {
          const error = new SluiceError(
            ERROR_CODES.BAD_REPLY,
            `Expected ${count * 4} integers from the ${script.name} script, got ${Array.isArray(reply) ? `${reply.length} values` : typeof reply}.`,
          );
          for (const item of items) item.reject(error);
          return;
        }
        for (let i = 0; i < count; i++) {
          const base = i * 4;
          (items[i] as Pending).resolve({
            allowed: reply[base] === 1,
            remaining: Number(reply[base + 1]),
            resetMs: Number(reply[base + 2]),
            retryAfterMs: Number(reply[base + 3]),
          });
        }
      },
      (error: unknown) => {
        // TRYAGAIN: the slot is being migrated and only some of these keys have moved. Redis refused
        // before running anything, and a call of one key cannot meet it (the client follows ASK).
        if (isTryAgain(error)) {
          const parts = byKey(items);
          if (parts.length > 1) {
            for (const part of parts) this.#send({ ...batch, items: part, sent: false });
            return;
          }
        }
        const wrapped = storeError(error);
        for (const item of items) item.reject(wrapped);
      },
    );
  }

  async #run(script: Script, args: string[], key: string): Promise<unknown> {
    this.calls++;
    if (this.mode === 'functions') {
      args[0] = 'FCALL';
      args[1] = script.functionName;
      // A server that lost the library (restart, FUNCTION FLUSH, new primary) gets it again. "Function
      // not found" means nothing ran, so a resend cannot count twice; and since another flush can land
      // between the load and the resend (seen under load), a few tries rather than one.
      for (let attempt = 1; ; attempt++) {
        const sentAt = ++this.#sent;
        try {
          return await this.#commander.send(args, key);
        } catch (error) {
          const lost = error instanceof Error && /function not found/i.test(error.message);
          if (!lost || attempt >= FUNCTION_TRIES) throw error;
        }
        await this.#loadLibrary(sentAt);
        this.calls++;
      }
    }
    args[0] = 'EVALSHA';
    args[1] = script.sha;
    try {
      return await this.#commander.send(args, key);
    } catch (error) {
      // Only NOSCRIPT earns a resend: any other error may have run the script, and a resend would count twice.
      if (!isNoScript(error)) throw error;
      const retry = args.slice();
      retry[0] = 'EVAL';
      retry[1] = script.body;
      this.calls++;
      return await this.#commander.send(retry, key);
    }
  }

  /**
   * Loads the library for a call that found it missing, sent when `#sent` was `failedAt`. Calls share
   * a load in flight only if it was sent after theirs: one sent before ran before their failure, so
   * whatever removed the library came after it.
   */
  #loadLibrary(failedAt: number): Promise<void> {
    if (this.#loading === undefined || this.#loadingSentAt < failedAt) {
      this.#loadingSentAt = ++this.#sent;
      const loading: Promise<void> = this.#commander
        .sendToPrimaries(['FUNCTION', 'LOAD', 'REPLACE', LIBRARY_CODE])
        .then(() => undefined)
        .finally(() => {
          if (this.#loading === loading) this.#loading = undefined;
        });
      this.#loading = loading;
    }
    return this.#loading;
  }
}

function storeError(error: unknown): SluiceError {
  if (error instanceof SluiceError) return error;
  // node-redis rejects a timed-out command with an empty message: its name is the news.
  const message = error instanceof Error ? error.message || error.name : String(error);
  return new SluiceError(ERROR_CODES.STORE, `Redis store failed: ${message}`, { cause: error });
}
