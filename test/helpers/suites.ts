// What every Redis-backed suite shares: the store variants to run under, and the end-of-suite hygiene checks.
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { fixedWindow, RedisStore } from '../../src/index.js';
import type { StoreRequest } from '../../src/types.js';
import { CLIENT_KINDS, type ClientKind, type Connected, connect } from './clients.js';
import { type RedisServer, startRedis } from './redis-server.js';

export type Mode = 'scripts' | 'functions';

/**
 * For suites that assert exact decisions: wait for Redis however slow this shared machine is, and
 * fail closed, so that a store failure shows up as a denial with a reason rather than a grant.
 */
export const EXACT = { timeoutMs: 60_000, onStoreError: 'deny' } as const;

/** Every client library in both modes: each Redis suite runs under all four. */
export const VARIANTS: ReadonlyArray<{ readonly kind: ClientKind; readonly mode: Mode }> =
  CLIENT_KINDS.flatMap((kind) => (['scripts', 'functions'] as const).map((mode) => ({ kind, mode })));

export interface Variant {
  readonly connected: Connected;
  readonly store: RedisStore;
}

export async function openVariant(
  kind: ClientKind,
  mode: Mode,
  port: number,
  prefix = 'rl',
): Promise<Variant> {
  const connected = await connect(kind, port);
  return { connected, store: new RedisStore({ client: connected.client, prefix, mode }) };
}

/** Keys matching `pattern` whose PTTL is -1 (no expiry), found with SCAN. */
export async function keysWithoutExpiry(connected: Connected, pattern = '*'): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = (await connected.command('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)) as [
      string,
      string[],
    ];
    cursor = String(next);
    for (const key of keys) {
      if (Number(await connected.command('PTTL', key)) === -1) found.push(key);
    }
  } while (cursor !== '0');
  return found;
}

/** Asserts the server holds no key without an expiry. */
export async function assertHygiene(connected: Connected): Promise<void> {
  assert.deepEqual(await keysWithoutExpiry(connected), [], 'every key has an expiry');
}

/** SLOWLOG entries that are limiter scripts (EVALSHA, EVAL or FCALL). */
export async function scriptsInSlowlog(connected: Connected): Promise<unknown[]> {
  const slowlog = (await connected.command('SLOWLOG', 'GET', 128)) as unknown[][];
  return slowlog.filter((entry) => /^(EVALSHA|EVAL|FCALL)$/i.test(String((entry[3] as unknown[])[0])));
}

/** A request for one unit of a fixed window of 10 per hour, for tests that call a store directly. */
export function oneUnit(name: string, identifier: string): StoreRequest {
  return {
    policy: fixedWindow({ limit: 10, windowMs: 3_600_000 }),
    name,
    identifier,
    operation: 'limit',
    cost: 1,
    now: undefined,
  };
}

let names = 0;
/** A limiter name no other test uses, so tests share one server without sharing keys. */
export function unique(label: string): string {
  names++;
  return `${label}${names}`;
}

/** A suite's redis-server and its ioredis connection, started before the file's tests and stopped after. */
export interface SuiteRedis {
  readonly server: RedisServer;
  readonly redis: Connected;
}

/** Starts a redis-server and connects ioredis to it for the calling file's tests (top-level hooks). */
export function redisForSuite(): SuiteRedis {
  const suite = {} as { server: RedisServer; redis: Connected };
  before(async () => {
    suite.server = await startRedis();
    suite.redis = await connect('ioredis', suite.server.port);
  });
  after(async () => {
    await suite.redis.close();
    await suite.server.stop();
  });
  return suite;
}
