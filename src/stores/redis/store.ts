// The Redis store: one script call per batch of decisions, each key decided atomically on the server.
import { ERROR_CODES, invalidOption, SluiceError } from '../../errors.js';
import { stateKey } from '../../keys.js';
import {
  type LimiterDeadline,
  OPERATION_CODE,
  type Operation,
  type Policy,
  type QueuedRequest,
  type Store,
  type StoreRequest,
  type StoreResult,
} from '../../types.js';
import { durationMs, keyPart, knownKeys, optionsObject, positiveInteger } from '../../validate.js';
import { atomicRequestsError } from '../atomic.js';
import { toCommander } from './adapters.js';
import { warnAboutClientSettings, warnAboutRequestTimeout } from './client-settings.js';
import type { ClientLibrary, Commander } from './commander.js';
import { Readiness } from './readiness.js';
import { Recovery } from './recovery.js';
import { settle } from './reply.js';
import { LIBRARY_CODE, SCRIPTS, type Script } from './scripts.js';
import { isTryAgain, storeError, type Unrun, unrunReason } from './server-errors.js';
import { keySlot } from './slot.js';

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * An ioredis or iovalkey client (direct or through Sentinel) or Cluster, a node-redis client,
   * cluster (`createCluster()`) or sentinel (`createSentinel()`), or a Valkey GLIDE `GlideClient`
   * or `GlideClusterClient`, already configured.
   */
  readonly client: unknown;
  /**
   * How long decisions made before the client's first connection wait for it; then the limiter's
   * `timeoutMs` applies. If the server cannot be reached in this time, those decisions (and later
   * ones, until it connects) get the failure policy's answer. Once connected, an outage is never
   * waited for: the failure policy answers within `timeoutMs`.
   * @default 5000
   */
  readonly connectTimeoutMs?: number;
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

/** A request in the queue, with its key, answered once. */
interface Pending {
  readonly request: StoreRequest;
  readonly key: string;
  answer(result: StoreResult): void;
  fail(error: unknown): void;
}

/** A request that takes its answer itself (see Store.enqueue): no promise, no closures. */
class Queued implements Pending {
  readonly request: QueuedRequest;
  readonly key: string;

  constructor(request: QueuedRequest, key: string) {
    this.request = request;
    this.key = key;
  }

  answer(result: StoreResult): void {
    this.request.answer(result);
  }

  fail(error: unknown): void {
    this.request.fail(error);
  }
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

const DEFAULTS = { prefix: 'rl', mode: 'scripts', maxBatch: 64, connectTimeoutMs: 5000 } as const;
/**
 * Sends per batch when the server keeps answering that the script did not run (each after a
 * repair): another flush can land between a reload and the resend (seen under load).
 */
const SEND_TRIES = 3;
/**
 * How long a call that met READONLY (a primary demoted by a failover) or a redirection its client
 * did not follow waits before it is resent, while the client learns the new owner.
 */
const REDIRECT_WAIT_MS = 50;
const COSTS = Array.from({ length: 101 }, (_, i) => String(i));

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
  readonly connectTimeoutMs: number;
  readonly #commander: Commander;
  /** The client as given, whose settings are checked against each limiter's timeoutMs. */
  readonly #client: unknown;
  readonly #readiness: Readiness;
  readonly #recovery = new Recovery((reason, key) => this.#repair(reason, key));
  #queue: Pending[] = [];
  #scheduled = false;
  /** Script or function calls sent, for tests and the benchmark's accounting. */
  calls = 0;

  constructor(options: RedisStoreOptions) {
    const raw = optionsObject('RedisStore options', options, true);
    knownKeys('RedisStore', raw, ['client', 'prefix', 'mode', 'maxBatch', 'connectTimeoutMs']);
    this.#commander = toCommander(raw.client);
    this.#client = raw.client;
    warnAboutClientSettings(raw.client, this.#commander.library, this.#commander.cluster);
    this.prefix = raw.prefix === undefined ? DEFAULTS.prefix : keyPart('RedisStore.prefix', raw.prefix);
    if (raw.mode !== undefined && raw.mode !== 'scripts' && raw.mode !== 'functions') {
      throw invalidOption('RedisStore.mode', "'scripts' or 'functions'", raw.mode);
    }
    this.mode = raw.mode ?? DEFAULTS.mode;
    this.maxBatch =
      raw.maxBatch === undefined
        ? DEFAULTS.maxBatch
        : positiveInteger('RedisStore.maxBatch', raw.maxBatch, 1000);
    this.connectTimeoutMs =
      raw.connectTimeoutMs === undefined
        ? DEFAULTS.connectTimeoutMs
        : durationMs('RedisStore.connectTimeoutMs', raw.connectTimeoutMs);
    this.#readiness = new Readiness(this.#commander, this.connectTimeoutMs);
  }

  /** Which client library and topology this store talks to. */
  get client(): { readonly library: ClientLibrary; readonly cluster: boolean } {
    return { library: this.#commander.library, cluster: this.#commander.cluster };
  }

  /**
   * Resolves once the client is connected; rejects with ERR_SLUICE_STORE, naming the address, when
   * it cannot connect within `connectTimeoutMs`. For apps that would rather not start serving before
   * their store can decide (limiters wait for the first connection by themselves).
   *
   * @example
   * const store = new RedisStore({ client: new Redis() });
   * await store.ready(); // throws if Redis cannot be reached within 5 s
   */
  ready(): Promise<void> {
    return this.#readiness.ready();
  }

  /** Warns once per client when a GLIDE client holds commands longer than a limiter waits for them. */
  attached(limiter: LimiterDeadline): void {
    warnAboutRequestTimeout(this.#client, this.#commander.library, limiter);
  }

  untilReady(): Promise<void> | undefined {
    return this.#readiness.untilReady();
  }

  /** On a cluster, the primary (`host:port`) that owns the request's slot in the client's slot table. */
  shardOf(request: StoreRequest): string | undefined {
    if (!this.#commander.cluster) return undefined;
    return this.#commander.primaryOf(
      keySlot(stateKey(this.prefix, request.name, request.identifier, request.tag)),
    );
  }

  keyFor(name: string, identifier: string, tag?: string): string {
    return stateKey(this.prefix, name, identifier, tag);
  }

  decide(request: StoreRequest): Promise<StoreResult> {
    const key = stateKey(this.prefix, request.name, request.identifier, request.tag);
    return new Promise<StoreResult>((answer, fail) => this.#push({ request, key, answer, fail }));
  }

  enqueue(request: QueuedRequest): void {
    this.#push(new Queued(request, stateKey(this.prefix, request.name, request.identifier, request.tag)));
  }

  #push(pending: Pending): void {
    this.#queue.push(pending);
    if (!this.#scheduled) {
      this.#scheduled = true;
      // After every promise continuation of this tick: decisions they start join the batch.
      process.nextTick(this.#flush);
    }
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
        throw storeError(error, this.#shardOfKey(firstKey));
      },
    );
  }

  async reset(name: string, identifier: string, tag?: string): Promise<void> {
    const key = stateKey(this.prefix, name, identifier, tag);
    try {
      await this.#commander.send(['DEL', key], key);
    } catch (error) {
      throw storeError(error, this.#shardOfKey(key));
    }
  }

  #shardOfKey(key: string): string | undefined {
    return this.#commander.cluster ? this.#commander.primaryOf(keySlot(key)) : undefined;
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    const cluster = this.#commander.cluster;
    // One open batch per policy and slot (on a cluster only keys of one slot may share a call). A
    // request that cannot join it (another operation or time, or a full batch) sends it first, so
    // each key sees its requests in the order they were made. Most ticks bring one policy and one
    // slot: the last batch is tried before the table, which is only made for a second one.
    let open: Map<Policy, Map<number, Batch>> | undefined;
    let last: Batch | undefined;
    let lastSlot = 0;
    // Calls of one key under several policies (a per-call limit) must still run in order: a batch
    // holding an earlier call for the key is sent before the key's next call joins another.
    const lastBatch = mixedPolicies(queue) ? new Map<string, Batch>() : undefined;
    for (const item of queue) {
      const request = item.request;
      const policy = request.policy;
      const slot = cluster ? keySlot(item.key) : 0;
      let batch: Batch | undefined;
      if (last !== undefined && last.policy === policy && lastSlot === slot) batch = last;
      else if (open !== undefined) batch = open.get(policy)?.get(slot);
      if (
        batch === undefined ||
        batch.sent ||
        batch.operation !== request.operation ||
        batch.now !== request.now ||
        batch.items.length >= this.maxBatch ||
        (policy.script === 'sliding-log' && batch.work + request.cost + 4 > MAX_LOG_BATCH_WORK)
      ) {
        if (batch !== undefined && !batch.sent) this.#send(batch);
        batch = { policy, operation: request.operation, now: request.now, items: [], work: 0, sent: false };
        if (last !== undefined && (last.policy !== policy || lastSlot !== slot)) {
          open ??= new Map([[last.policy, new Map([[lastSlot, last]])]]);
        }
        if (open !== undefined) {
          let bySlot = open.get(policy);
          if (bySlot === undefined) {
            bySlot = new Map();
            open.set(policy, bySlot);
          }
          bySlot.set(slot, batch);
        }
      }
      if (lastBatch !== undefined) {
        const earlier = lastBatch.get(item.key);
        if (earlier !== undefined && earlier !== batch && !earlier.sent) this.#send(earlier);
        lastBatch.set(item.key, batch);
      }
      batch.items.push(item);
      batch.work += request.cost + 4;
      last = batch;
      lastSlot = slot;
    }
    if (open === undefined) {
      if (last !== undefined && !last.sent) this.#send(last);
      return;
    }
    for (const bySlot of open.values()) {
      for (const batch of bySlot.values()) if (!batch.sent) this.#send(batch);
    }
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
        if (!settle(items, reply)) {
          const error = new SluiceError(
            ERROR_CODES.BAD_REPLY,
            `Expected one record per key (${count}) from the ${script.name} script, got ${Array.isArray(reply) ? `${reply.length} values that do not make them` : typeof reply}.`,
          );
          for (const item of items) item.fail(error);
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
        const wrapped = storeError(error, this.#shardOfKey((items[0] as Pending).key));
        for (const item of items) item.fail(wrapped);
      },
    );
  }

  async #run(script: Script, args: string[], key: string): Promise<unknown> {
    // While a repair is under way, calls wait until the calls it repairs have been sent again.
    const gate = this.#recovery.gate;
    if (gate !== undefined) await gate;
    const functions = this.mode === 'functions';
    args[0] = functions ? 'FCALL' : 'EVALSHA';
    args[1] = functions ? script.functionName : script.sha;
    for (let attempt = 1; ; attempt++) {
      if (attempt === SEND_TRIES && !functions) {
        // Flushes keep landing between the loads and the resends: the body itself, which needs no load.
        args[0] = 'EVAL';
        args[1] = script.body;
      }
      this.calls++;
      const sentAt = this.#recovery.stamp();
      try {
        return await this.#commander.send(args, key);
      } catch (error) {
        // Only a reply that proves the script did not run earns a resend: any other error may have
        // run it, and a resend would count twice.
        const reason = unrunReason(error, functions);
        if (reason === undefined || attempt >= SEND_TRIES) throw error;
        await this.#recovery.repair(reason, sentAt, key, this.#shardOfKey(key) ?? '');
      }
    }
  }

  /**
   * Makes the node that owns `key` able to run the scripts again: SCRIPT LOAD (scripts loaded by
   * EVAL may be evicted on Redis 7.4 and later, loaded ones are not) or FUNCTION LOAD there; after
   * READONLY or MOVED, a pause while the client learns who the new primary is.
   */
  async #repair(reason: Unrun, key: string): Promise<void> {
    if (reason === 'readonly' || reason === 'moved') {
      await new Promise((resolve) => setTimeout(resolve, REDIRECT_WAIT_MS));
      return;
    }
    const loads =
      reason === 'function'
        ? [['FUNCTION', 'LOAD', 'REPLACE', LIBRARY_CODE]]
        : Object.values(SCRIPTS).map((script) => ['SCRIPT', 'LOAD', script.body]);
    // The owner must have them; every other primary, as far as it can be reached, gets them too: a
    // call reached by ASK runs on a node that does not own the slot yet.
    await Promise.all([
      ...loads.map((args) => this.#commander.sendToOwner(args, key)),
      ...loads.map((args) => this.#commander.broadcast(args)),
    ]);
  }
}
