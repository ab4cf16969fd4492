// The Redis store: one script call per batch of decisions, each key decided atomically on the server.
import { ERROR_CODES, invalidOption, SluiceError } from '../../errors.js';
import { stateKey } from '../../keys.js';
import type {
  AtomicBatch,
  LimiterDeadline,
  Store,
  StoredEntries,
  StoreReply,
  StoreRequest,
  StoreResult,
  StoreScripts,
} from '../../types.js';
import { durationMs, keyPart, knownKeys, optionsObject, positiveInteger } from '../../validate.js';
import { toCommander } from './adapters.js';
import { warnAboutClientSettings, warnAboutRequestTimeout } from './client-settings.js';
import { combinedCall, combinedResults } from './combined-call.js';
import type { ClientLibrary, Commander } from './commander.js';
import type { RedisStoreOptions } from './options.js';
import { Readiness } from './readiness.js';
import { Recovery } from './recovery.js';
import { answerRecords } from './reply.js';
import { LIBRARY_CODE, SCRIPTS, type Script } from './scripts.js';
import { isTryAgain, redisStoreError, type Unrun, unrunReason } from './server-errors.js';
import { keySlot } from './slot.js';
import { RedisStoredEntries } from './stored-entries.js';
import { type Batch, batchCall, byKey, coalesce, type Items, scheduleFlush } from './wire.js';

export type { RedisStoreOptions } from './options.js';

const DEFAULTS = { prefix: 'rl', mode: 'scripts', maxBatch: 64, connectTimeoutMs: 5000 } as const;
/**
 * Sends per batch when the server keeps answering that the script did not run (each after a repair): a flush
 * can land between a reload and the resend (seen under load), so the last carries the body (EVAL) with it.
 */
const SEND_TRIES = 3;
/**
 * How long a call that met READONLY (a primary demoted by a failover) or a redirection its client
 * did not follow waits before it is resent, while the client learns the new owner.
 */
const REDIRECT_WAIT_MS = 50;

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
  /** Whether the scripts have been loaded for the first decisions (see untilReady). */
  #loaded = false;
  #loading: Promise<void> | undefined;
  /** While a repair is under way, what calls await before they are sent; and the sends, numbered (see Recovery). */
  #gate: Promise<void> | undefined;
  #sent = 0;
  readonly #recovery = new Recovery(
    (reason, key) => this.#repair(reason, key),
    (gate) => (this.#gate = gate),
  );
  /** The requests on their own not yet sent, made by the first; batches sent and not answered (see submit). */
  #queue: Items | undefined;
  #scheduled = false;
  #inFlight = 0;
  /** Script or function calls sent, for tests and the benchmark's accounting. */
  calls = 0;
  /** Limits and denials stored per identifier, beside their state (see `LimiterOptions.overrides`). */
  readonly stored: StoredEntries;

  /** Scripts that are not decisions (a global budget's ledger), run as decisions' scripts are. */
  readonly scripts: StoreScripts = {
    groupOf: (key) => (this.#commander.cluster ? keySlot(key) : 0),
    run: (name, keys, args) => this.#runNamed(name, keys, args),
  };

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
    this.stored = new RedisStoredEntries(this.prefix, {
      run: (name, args, key) =>
        this.#run(SCRIPTS[name], args, key).catch((error: unknown) => {
          throw redisStoreError(error, this.#shardOfKey(key));
        }),
      command: (args, key) => this.#command(args, key),
    });
  }

  /** StoreScripts.run: the registry's script `name` over `keys`, routed by the first. */
  async #runNamed(name: string, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    const script = (SCRIPTS as Readonly<Record<string, Script | undefined>>)[name];
    const key = keys[0];
    if (script === undefined || key === undefined) {
      throw new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        `Expected the name of a registered script and at least one key, got ${JSON.stringify(name)} with ${keys.length} keys.`,
      );
    }
    try {
      return await this.#run(script, ['', '', String(keys.length), ...keys, ...args], key);
    } catch (error) {
      throw redisStoreError(error, this.#shardOfKey(key));
    }
  }

  /** One command routed by `key`, its failure named as the store's. */
  async #command(args: readonly string[], key: string): Promise<unknown> {
    try {
      return await this.#commander.send(args, key);
    } catch (error) {
      throw redisStoreError(error, this.#shardOfKey(key));
    }
  }

  /** Which client library and topology this store talks to. */
  get client(): { readonly library: ClientLibrary; readonly cluster: boolean } {
    return { library: this.#commander.library, cluster: this.#commander.cluster };
  }

  /**
   * Resolves once the client is connected and the scripts (in `functions` mode, the library) are
   * loaded on the server, on every primary of a cluster it can reach; rejects with
   * ERR_SLUICE_STORE, naming the address, when it cannot connect within `connectTimeoutMs`. For
   * apps that would rather not start serving before their store can decide (limiters wait for the
   * same by themselves, see `untilReady`). A load the server refuses is not an error here:
   * decisions load the scripts then.
   *
   * @example
   * const store = new RedisStore({ client: new Redis() });
   * await store.ready(); // throws if Redis cannot be reached within 5 s
   */
  async ready(): Promise<void> {
    await this.#readiness.ready();
    await this.#load();
    this.#loaded = true;
  }

  /**
   * `undefined` once the scripts have been loaded for the first decisions. Before that, the wait
   * for the first connection (see Readiness), then for the scripts' load, which is not waited for
   * longer than `connectTimeoutMs`: a first decision that had to load them would do it within its
   * limiter's `timeoutMs`, and a busy server could turn it into the failure policy's answer.
   */
  untilReady(): Promise<void> | undefined {
    if (this.#loaded) return undefined;
    const connecting = this.#readiness.untilReady();
    return connecting === undefined ? this.#loadOnce() : connecting.then(() => this.#loadOnce());
  }

  #loadOnce(): Promise<void> {
    this.#loading ??= new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.connectTimeoutMs);
      // A process with nothing else to do need not stay up for this timer.
      timer.unref();
      this.#load().then(() => {
        clearTimeout(timer);
        resolve();
      });
    }).then(() => {
      this.#loaded = true;
    });
    return this.#loading;
  }

  /**
   * Loads what the server lacks: on one node, the scripts SCRIPT EXISTS does not find (one short
   * command when another process has loaded them), or the library (FUNCTION LOAD without REPLACE:
   * one that exists is refused before it is compiled); on a cluster, the same loads as a repair,
   * sent to every primary. Settles whatever the replies.
   */
  async #load(): Promise<void> {
    const functions = this.mode === 'functions';
    if (this.#commander.cluster) {
      await Promise.allSettled(this.#loads(functions).map((args) => this.#commander.broadcast(args)));
      return;
    }
    const send = (args: readonly string[]): Promise<unknown> => this.#commander.sendToOwner(args, '');
    if (functions) {
      await send(['FUNCTION', 'LOAD', LIBRARY_CODE]).catch(() => {});
      return;
    }
    const scripts = Object.values(SCRIPTS);
    const exist = await send(['SCRIPT', 'EXISTS', ...scripts.map((script) => script.sha)]).catch(() => []);
    const found = Array.isArray(exist) ? exist : [];
    await Promise.allSettled(
      scripts.filter((_, i) => !found[i]).map((script) => send(['SCRIPT', 'LOAD', script.body])),
    );
  }

  /** The commands that load what a call missed: the function library, or every script. */
  #loads(functions: boolean): string[][] {
    return functions
      ? [['FUNCTION', 'LOAD', 'REPLACE', LIBRARY_CODE]]
      : Object.values(SCRIPTS).map((script) => ['SCRIPT', 'LOAD', script.body]);
  }

  /** Warns once per client when a GLIDE client holds commands longer than a limiter waits for them. */
  attached(limiter: LimiterDeadline): void {
    warnAboutRequestTimeout(this.#client, this.#commander.library, limiter);
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
    return new Promise<StoreResult>((resolve, reject) =>
      this.submit([request], {
        answered: (_, result) => resolve(result),
        failed: (_, error) => reject(error),
      }),
    );
  }

  /**
   * Requests on their own are queued, sent as one script call per policy and slot (#flush, scheduleFlush); requests
   * `together` are one call of the combined script (lua/all.lua), not coalesced.
   */
  submit<R extends StoreRequest>(requests: readonly R[], reply: StoreReply<R>, together?: AtomicBatch): void {
    if (together !== undefined) {
      this.#sendTogether(requests, reply as StoreReply, together.keys);
      return;
    }
    this.#queue ??= { requests: [], keys: [], replies: [] };
    const queue = this.#queue;
    for (const request of requests) {
      queue.requests.push(request);
      queue.keys.push(stateKey(this.prefix, request.name, request.identifier, request.tag));
      queue.replies.push(reply as StoreReply);
    }
    if (!this.#scheduled) {
      this.#scheduled = true;
      scheduleFlush(this.#flush, this.#inFlight > 0);
    }
  }

  /**
   * One call of the combined script (lua/all.lua) over every key: each is looked at, and `limit`
   * takes from all only when all allow. The caller checked the keys (one slot, all distinct).
   */
  #sendTogether(requests: readonly StoreRequest[], reply: StoreReply, keys: readonly string[]): void {
    const firstKey = keys[0];
    if (requests.length === 0 || firstKey === undefined) return;
    const call = combinedCall(requests, keys);
    const fail = (error: unknown): void => {
      for (const request of requests) reply.failed(request, error);
    };
    this.#run(call.script, call.args, firstKey).then(
      (answer) => {
        const results = combinedResults(call, answer, requests.length);
        if (results instanceof SluiceError) {
          fail(results);
          return;
        }
        for (let i = 0; i < requests.length; i++) {
          reply.answered(requests[i] as StoreRequest, results[i] as StoreResult);
        }
      },
      (error: unknown) => fail(redisStoreError(error, this.#shardOfKey(firstKey))),
    );
  }

  async reset(name: string, identifier: string, tag?: string): Promise<void> {
    const key = stateKey(this.prefix, name, identifier, tag);
    await this.#command(['DEL', key], key);
  }

  #shardOfKey(key: string): string | undefined {
    return this.#commander.cluster ? this.#commander.primaryOf(keySlot(key)) : undefined;
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = undefined;
    if (queue !== undefined) coalesce(queue, this.#commander.cluster, this.maxBatch, this.#send);
  };

  /** One script call for a batch; each request answered with its record of the reply. */
  readonly #send = (batch: Batch): void => {
    batch.sent = true;
    const { requests, keys, replies } = batch;
    const stored = batch.storedReads !== 0;
    const { script, args, fields } = batchCall(batch);
    const count = requests.length;
    this.#inFlight++;
    this.#run(script, args, keys[0] as string).then(
      (reply) => {
        this.#inFlight--;
        if (answerRecords(reply, requests, replies, fields, stored)) return;
        const error = new SluiceError(
          ERROR_CODES.BAD_REPLY,
          `Expected one record per key (${count}) from the ${script.name} script, got ${Array.isArray(reply) ? `${reply.length} values that do not make them` : typeof reply}.`,
        );
        for (let i = 0; i < count; i++) (replies[i] as StoreReply).failed(requests[i] as StoreRequest, error);
      },
      (error: unknown) => {
        this.#inFlight--;
        // TRYAGAIN: the slot is being migrated and only some of these keys have moved. Redis refused
        // before running anything, and a call of one key cannot meet it (the client follows ASK).
        if (isTryAgain(error)) {
          const parts = byKey(batch);
          if (parts.length > 1) {
            for (const part of parts) this.#send(part);
            return;
          }
        }
        const wrapped = redisStoreError(error, this.#shardOfKey(keys[0] as string));
        for (let i = 0; i < count; i++)
          (replies[i] as StoreReply).failed(requests[i] as StoreRequest, wrapped);
      },
    );
  };

  /** Sends a script call, again after a reply that proves it did not run (`attempt` counts): one send, usually. */
  #run(script: Script, args: string[], key: string, attempt = 1): Promise<unknown> {
    // While a repair is under way, calls wait until the calls it repairs have been sent again.
    const gate = this.#gate;
    if (gate !== undefined && attempt === 1) return gate.then(() => this.#run(script, args, key));
    const functions = this.mode === 'functions';
    args[0] = functions ? 'FCALL' : 'EVALSHA';
    args[1] = functions ? script.functionName : script.sha;
    if (attempt >= SEND_TRIES) {
      // Flushes keep landing between the loads and the resends: the body itself, which needs no
      // load. In functions mode too: each function is this same body, so EVAL decides the same way.
      args[0] = 'EVAL';
      args[1] = script.body;
    }
    this.calls++;
    const sentAt = ++this.#sent;
    let sent: Promise<unknown>;
    try {
      sent = this.#commander.send(args, key);
    } catch (error) {
      sent = Promise.reject(error);
    }
    return sent.catch((error: unknown) => {
      // Only a reply that proves the script did not run earns a resend: any other error may have
      // run it, and a resend would count twice.
      const reason = unrunReason(error, functions);
      if (reason === undefined || attempt >= SEND_TRIES) throw error;
      const repaired = this.#recovery.repair(reason, sentAt, ++this.#sent, key, this.#shardOfKey(key) ?? '');
      // A resend does not wait at the gate: it is what the gate holds the later calls behind.
      return repaired.then(() => this.#run(script, args, key, attempt + 1));
    });
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
    const loads = this.#loads(reason === 'function');
    // The owner must have them; every other primary, as far as it can be reached, gets them too: a
    // call reached by ASK runs on a node that does not own the slot yet.
    await Promise.all([
      ...loads.map((args) => this.#commander.sendToOwner(args, key)),
      ...loads.map((args) => this.#commander.broadcast(args)),
    ]);
  }
}
