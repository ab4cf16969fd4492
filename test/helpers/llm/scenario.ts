// The LLM scenario: a local upstream streams answers whose final event reports their token usage;
// worker processes proxy it behind a limiter of tokens per user on one Redis, their clients all at once.
// Shared by its test and the benchmark: it imports nothing of node:test.
import { type ChildProcess, fork } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import {
  createLimiter,
  type Decision,
  type GcraState,
  type Operation,
  RedisStore,
} from '../../../src/index.js';
import { stateKey } from '../../../src/keys.js';
import { decodeTat } from '../../../src/stores/redis/stored.js';
import { seeded } from '../random.js';
import { ESTIMATE, LIMIT, type Outcome, policy, type Task, USAGE, USER, type Variant } from './shared.js';

/** What one run of a variant measured. */
export interface Figures {
  readonly variant: Variant;
  /** The run's limiter and its frozen instant, for looking at the user's state afterwards (`peekAt`). */
  readonly name: string;
  readonly t0: number;
  readonly admitted: number;
  readonly refused: number;
  /** Tokens the admitted requests were served, as their streams reported them. */
  readonly served: number;
  /** Tokens the limiter holds as used once every response is done. */
  readonly counted: number;
  readonly limit: number;
  /** Tokens settles did not take (maxDebt), and tokens refused charges dropped (charge-only). */
  readonly cutOff: number;
  readonly dropped: number;
  /**
   * The bound on `served − limit`: the usage beyond their estimate of the requests in flight when the
   * last request was admitted, from the store's own order of operations (`settle` only).
   */
  readonly excessInFlight: number | undefined;
  /** How long the user then waits before a request of the estimate is admitted again. */
  readonly waitMs: number;
}

/** The upstream: each answer streams a few chunks, then its usage (50 to 400 tokens, seeded), then [DONE]. */
function upstream(seed: number): Server {
  const random = seeded(seed);
  return createServer((_request, response) => {
    const total = random.int(USAGE.min, USAGE.max);
    response.writeHead(200, { 'Content-Type': 'text/event-stream' });
    const events = [
      ...['The', ' answer', ' streams', '.'].map((content) => ({
        choices: [{ index: 0, delta: { content } }],
      })),
      { choices: [], usage: { prompt_tokens: 20, completion_tokens: total - 20, total_tokens: total } },
    ];
    const next = (): void => {
      const event = events.shift();
      if (event === undefined) {
        response.end('data: [DONE]\n\n');
        return;
      }
      response.write(`data: ${JSON.stringify(event)}\n\n`);
      setTimeout(next, 1);
    };
    next();
  });
}

/** The TAT a GCRA key holds (see gcra.lua and decodeTat in src/stores/redis/stored.ts). */
function tatOf(value: string | null): number | undefined {
  return value === null ? undefined : decodeTat(value);
}

const OPERATIONS: Readonly<Record<string, Operation>> = {
  '0': 'limit',
  '1': 'peek',
  '2': 'refund',
  '3': 'charge',
};

/**
 * Replays the scripts' calls on `key`, in the order Redis ran them (MONITOR's), through the policy's
 * twin at the frozen instant: which grant was the last, and the usage beyond the estimate that the
 * settles after it added (each settle after it belongs to a request in flight then). Also the tokens
 * used at the end, which must equal what Redis holds.
 */
function replay(commands: readonly string[][], key: string, t0: number): { excess: number; used: number } {
  const twin = policy();
  const steps: Array<{ operation: Operation; cost: number; allowed: boolean }> = [];
  let state: GcraState | undefined;
  for (const args of commands) {
    const keys = Number(args[2]);
    // The operation's code, before its shape (`<code>:<operands>:<fields>`, see lua/single.lua).
    const code = (args[3 + keys] as string).split(':')[0] as string;
    // The costs follow the operation, the time and two parameters: one per key, or, when a batch's
    // keys all ask for the same, that cost once as '*<cost>' (see batchCall in src/stores/redis/wire.ts).
    const first = args[7 + keys] as string;
    const shared = first.startsWith('*') ? Number(first.slice(1)) : undefined;
    for (let i = 0; i < keys; i++) {
      if (args[3 + i] !== key) continue;
      const operation = OPERATIONS[code] as Operation;
      const cost = shared ?? Number(args[7 + keys + i]);
      const outcome = twin.decide(state, t0, operation, cost);
      if (outcome.ttlMs > 0) state = outcome.state;
      steps.push({ operation, cost, allowed: outcome.allowed });
    }
  }
  let last = -1;
  steps.forEach((step, i) => {
    if (step.operation === 'limit' && step.allowed) last = i;
  });
  let excess = 0;
  for (const step of steps.slice(last + 1)) {
    if (step.operation === 'charge') excess += step.cost;
    if (step.operation === 'refund') excess -= step.cost;
  }
  const intervalMs = twin.rule.parameters[0];
  // No pause is ever written here, but the state's type allows one.
  const tat = typeof state === 'object' ? state.tat : state;
  return { excess, used: tat === undefined ? 0 : Math.round((tat - t0) / intervalMs) };
}

/** Sends a message to a worker and waits for its answer. */
function ask<T>(worker: ChildProcess, message: object): Promise<T> {
  return new Promise((resolve, reject) => {
    worker.once('message', (reply: T & { error?: string }) => {
      if (reply.error !== undefined) reject(new Error(reply.error));
      else resolve(reply);
    });
    worker.send(message);
  });
}

/** The scenario's servers and processes, started once, run per variant. */
export class Scenario {
  readonly #redisPort: number;
  readonly #admin: Redis;
  readonly #upstream: Server;
  readonly #upstreamUrl: string;
  readonly #workers: ChildProcess[];
  /** The client of `peekAt`'s limiters, set up as sluice asks (the admin connection is not). */
  #client: Redis | undefined;
  #runs = 0;

  private constructor(redisPort: number, admin: Redis, server: Server, url: string, workers: ChildProcess[]) {
    this.#redisPort = redisPort;
    this.#admin = admin;
    this.#upstream = server;
    this.#upstreamUrl = url;
    this.#workers = workers;
  }

  /** Starts the upstream and `processes` workers against the Redis on `redisPort`. */
  static async start(redisPort: number, processes: number, seed: number): Promise<Scenario> {
    const server = upstream(seed);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
    const workers = Array.from({ length: processes }, () =>
      fork(new URL('./worker.js', import.meta.url), { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
    );
    await Promise.all(workers.map((worker) => new Promise((resolve) => worker.once('message', resolve))));
    const admin = new Redis({ port: redisPort, host: '127.0.0.1', lazyConnect: true });
    await admin.connect();
    return new Scenario(redisPort, admin, server, url, workers);
  }

  /**
   * Runs a variant: every worker's `perProcess` requests at once, at one instant of the limiters'
   * clock (a minute's refill would otherwise blur what the limit let through: the scenario is about
   * counting, and every decision is still made by the scripts on Redis).
   */
  async run(variant: Variant, perProcess: number): Promise<Figures> {
    const t0 = 1_900_000_000_000 + 3_600_000 * this.#runs;
    const name = `llm-${variant}-${++this.#runs}`;
    const key = stateKey('rl', name, USER);
    const monitor = await this.#admin.monitor();
    const commands: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (/^(evalsha|eval)$/i.test(args[0] ?? '') && args.includes(key)) commands.push(args);
    });
    const task: Task = {
      redisPort: this.#redisPort,
      upstream: this.#upstreamUrl,
      variant,
      name,
      t0,
      requests: perProcess,
    };
    await Promise.all(this.#workers.map((worker) => ask(worker, { prepare: task })));
    const outcomes = await Promise.all(
      this.#workers.map((worker) => ask<{ outcome: Outcome }>(worker, { go: true })),
    );
    // MONITOR has shown every call once a later command of ours comes through it.
    const marker = `llm-marker-${name}`;
    const seen = new Promise<void>((resolve) =>
      monitor.on('monitor', (_time: string, args: string[]) => args.includes(marker) && resolve()),
    );
    await this.#admin.exists(marker);
    await seen;
    monitor.disconnect();
    return this.#figures(
      variant,
      name,
      key,
      t0,
      outcomes.map((o) => o.outcome),
      commands,
    );
  }

  async #figures(
    variant: Variant,
    name: string,
    key: string,
    t0: number,
    outcomes: readonly Outcome[],
    commands: readonly string[][],
  ): Promise<Figures> {
    const calls = outcomes.flatMap((outcome) => outcome.calls);
    const admitted = calls.filter((call) => call.status === 200);
    const tat = tatOf(await this.#admin.get(key));
    const intervalMs = policy().rule.parameters[0];
    const counted = tat === undefined ? 0 : Math.round((tat - t0) / intervalMs);
    const replayed = replay(commands, key, t0);
    if (replayed.used !== counted) {
      throw new Error(
        `the replay of MONITOR's calls ends at ${replayed.used} tokens, Redis holds ${counted}`,
      );
    }
    const next = await this.peekAt(name, t0, ESTIMATE);
    return {
      variant,
      name,
      t0,
      admitted: admitted.length,
      refused: calls.filter((call) => call.status === 429).length,
      served: admitted.reduce((sum, call) => sum + call.tokens, 0),
      counted,
      limit: LIMIT,
      cutOff: outcomes.reduce((sum, outcome) => sum + outcome.cutOff, 0),
      dropped: outcomes.reduce((sum, outcome) => sum + outcome.dropped, 0),
      excessInFlight: variant === 'settle' ? replayed.excess : undefined,
      waitMs: next.retryAfterMs,
    };
  }

  /** What a request of `cost` would be told at `now` by a run's limiter (named `name`). */
  async peekAt(name: string, now: number, cost: number): Promise<Decision> {
    this.#client ??= new Redis({
      port: this.#redisPort,
      host: '127.0.0.1',
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    });
    const limiter = createLimiter({
      store: new RedisStore({ client: this.#client, connectTimeoutMs: 20_000 }),
      policy: policy(),
      name,
      clock: () => now,
      timeoutMs: 20_000,
    });
    return limiter.peek(USER, { cost });
  }

  async close(): Promise<void> {
    await Promise.all(
      this.#workers.map(
        (worker) =>
          new Promise((resolve) => {
            worker.once('exit', resolve);
            worker.send({ exit: true });
          }),
      ),
    );
    this.#admin.disconnect();
    this.#client?.disconnect();
    await new Promise<void>((resolve) => this.#upstream.close(() => resolve()));
  }
}
