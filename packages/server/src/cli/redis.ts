// The CLI's Redis connection: ioredis loaded at run time, URLs checked, failures named in one line.
import type { Cluster, RedisOptions as IoRedisOptions, Redis } from 'ioredis';
import { CliError, errorText } from './errors.js';

/** A connection to one server or to every primary of a cluster. */
export interface Connection {
  /** What a RedisStore is given: the client, or the Cluster. */
  readonly client: Redis | Cluster;
  /** One client per primary (the server itself when not a cluster), for SCAN, INFO and SLOWLOG. */
  readonly primaries: readonly Redis[];
  readonly cluster: boolean;
  /** The URL without its password, for messages. */
  readonly label: string;
  /** `Redis 7.0.15`, `Valkey 8.0.1`. */
  readonly server: string;
  close(): Promise<void>;
}

// ioredis types replyMapping in two ways that exactOptionalPropertyTypes will not unify; the CLI never sets it.
type RedisOptions = Omit<IoRedisOptions, 'replyMapping'>;

export interface Target {
  readonly options: RedisOptions;
  readonly label: string;
  readonly host: string;
  readonly port: number;
}

export const DEFAULT_URL = 'redis://127.0.0.1:6379';

/** The `--redis` value, or `$SLUICE_REDIS_URL`, or the local default. */
export function redisUrl(flag: string | undefined): string {
  return flag ?? process.env.SLUICE_REDIS_URL ?? DEFAULT_URL;
}

/** `host`, `host:port`, `[::1]:port`: what people type when they mean redis://host:port. */
const HOST_AND_PORT = /^(\[[\da-fA-F:.]+\]|[\w.-]+)(:\d{1,5})?$/;

/** Checks a host:port, redis:// or rediss:// URL and turns it into ioredis options. */
export function parseRedisUrl(text: string): Target {
  const bad = (why: string): CliError =>
    new CliError(
      `Invalid --redis URL ${JSON.stringify(redact(text))}: ${why}; expected host:port, redis://[user:password@]host:port[/db] or rediss://...`,
    );
  let url: URL;
  try {
    url = new URL(HOST_AND_PORT.test(text) ? `redis://${text}` : text);
  } catch {
    throw bad('not a URL');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw bad(`the scheme is ${JSON.stringify(url.protocol.replace(/:$/, ''))}`);
  }
  if (url.hostname === '') throw bad('no host');
  const port = url.port === '' ? 6379 : Number(url.port);
  const path = url.pathname.replace(/^\//, '');
  const db = path === '' ? 0 : /^\d+$/.test(path) ? Number(path) : Number.NaN;
  if (!Number.isSafeInteger(db)) throw bad(`the database ${JSON.stringify(path)} is not a number`);
  // URL keeps IPv6 hosts in brackets; sockets want them bare.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const options: RedisOptions = { host, port, db };
  if (url.username !== '') options.username = decodeURIComponent(url.username);
  if (url.password !== '') options.password = decodeURIComponent(url.password);
  if (url.protocol === 'rediss:') options.tls = { servername: host };
  return { options, label: redact(url.toString()).replace(/\/$/, ''), host, port };
}

/** The URL with its password replaced, so that messages and output never show it. */
export function redact(text: string): string {
  try {
    const url = new URL(text);
    if (url.password !== '') url.password = '***';
    return url.toString().replace(/\/$/, '');
  } catch {
    return text.replace(/\/\/([^@/]*):[^@/]*@/, '//$1:***@');
  }
}

interface IoRedisModule {
  readonly Redis: typeof Redis;
  readonly Cluster: typeof Cluster;
}

/** ioredis is an optional peer: load it only when a command needs Redis. */
export async function loadIoredis(): Promise<IoRedisModule> {
  try {
    return await import('ioredis');
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new CliError(
        'This command talks to Redis through ioredis, which is not installed: npm install ioredis',
      );
    }
    throw error;
  }
}

/** Turns what ioredis reported into one line an operator can act on. */
export function describeFailure(error: unknown, target: Target): string {
  const where = `${target.host}:${target.port}`;
  const code = (error as { code?: unknown } | null)?.code;
  const message = errorText(error);
  if (code === 'ECONNREFUSED')
    return `Cannot connect to ${where}: connection refused (is Redis running there?).`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return `Cannot resolve host ${JSON.stringify(target.host)}.`;
  if (code === 'ETIMEDOUT') return `Cannot connect to ${where}: timed out.`;
  if (code === 'ECONNRESET' || code === 'EPIPE') {
    return `The server at ${where} closed the connection: it is not a Redis server, or it refused this client (TLS expected?).`;
  }
  if (/^WRONGPASS/.test(message)) {
    return `Authentication failed at ${where}: wrong username or password (${message.replace(/\.$/, '')}).`;
  }
  if (/^NOAUTH/.test(message)) {
    return `Authentication required at ${where}: give the password in the URL, redis://:password@${where} or redis://user:password@${where}.`;
  }
  const resp = /Unknown RESP type \d+ "(.)"|Protocol error, got "(.)"/.exec(message);
  if (resp !== null) {
    const first = resp[1] ?? resp[2] ?? '';
    const http =
      first === 'H'
        ? ' (it answered like an HTTP server)'
        : first === '<'
          ? ' (it answered with HTML: a web server?)'
          : '';
    return `The server at ${where} is not a Redis server: its reply does not speak RESP${http}.`;
  }
  if (/certificate|SSL|TLS|wrong version number/i.test(message))
    return `TLS failed with ${where}: ${message}.`;
  return `Cannot use the Redis server at ${where}: ${message}`;
}

function baseOptions(target: Target, timeoutMs: number): RedisOptions {
  return {
    ...target.options,
    lazyConnect: true,
    // An operator's tool reports a failure; it does not wait out a reconnect loop.
    retryStrategy: () => null,
    // The settings RedisStore expects (docs/redis.md#client-settings): a command never waits
    // behind a dead connection, and one lost with its connection is not sent twice.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    // RESP2 replies have the same shape on every server and client setting this tool meets.
    protocol: 2,
  };
}

/**
 * Reconnecting after a blip, for a long-running service: a command sent while the connection is
 * down fails at once (no offline queue), so the service answers 503 instead of hanging.
 */
function persistentOptions(options: RedisOptions): RedisOptions {
  return {
    ...options,
    retryStrategy: (attempt: number) => Math.min(attempt * 100, 2000),
  };
}

export interface ConnectOptions {
  /**
   * Keep reconnecting after the first connection (for `serve`). The first connection still
   * fails fast, with the one-line messages, when the URL or the server is wrong.
   * @default false
   */
  readonly persistent?: boolean;
}

/** Connects, proves the server speaks Redis, and on a cluster connects to every primary. */
export async function connect(
  url: string,
  timeoutMs: number,
  options: ConnectOptions = {},
): Promise<Connection> {
  const target = parseRedisUrl(url);
  const io = await loadIoredis();
  const strict = baseOptions(target, timeoutMs);
  const single = await open(new io.Redis(strict), target, timeoutMs);
  const info = String(await single.info('server'));
  const clusterInfo = String(await single.info('cluster'));
  const server = serverName(info);
  if (!/cluster_enabled:1/.test(clusterInfo)) {
    let client = single;
    if (options.persistent === true) {
      await quit(single);
      client = await open(new io.Redis(persistentOptions(strict)), target, timeoutMs);
    }
    return {
      client,
      primaries: [client],
      cluster: false,
      label: target.label,
      server,
      close: async () => {
        await quit(client);
      },
    };
  }
  await quit(single);
  const { host, port, db: _db, ...shared } = options.persistent === true ? persistentOptions(strict) : strict;
  const cluster = new io.Cluster([{ host: host as string, port: port as number }], {
    lazyConnect: true,
    redisOptions: shared,
    ...(options.persistent === true ? { enableOfflineQueue: false } : { clusterRetryStrategy: () => null }),
  });
  await open(cluster, target, timeoutMs);
  const primaries = cluster.nodes('master');
  return {
    client: cluster,
    primaries,
    cluster: true,
    label: target.label,
    server: `${server} cluster, ${primaries.length} primaries`,
    close: async () => {
      await quit(cluster);
    },
  };
}

async function open<T extends Redis | Cluster>(client: T, target: Target, timeoutMs: number): Promise<T> {
  let first: unknown;
  const onError = (error: unknown): void => {
    first ??= error;
  };
  client.on('error', onError);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new CliError(
            `No answer from ${target.host}:${target.port} within ${timeoutMs} ms: is it a Redis server? (--timeout sets the wait)`,
          ),
        ),
      timeoutMs,
    );
  });
  try {
    await Promise.race([client.connect().then(() => client.ping()), timeout]);
  } catch (error) {
    client.disconnect();
    if (error instanceof CliError) throw error;
    // ioredis rejects with "Connection is closed."; the reason came first, as an 'error' event.
    throw new CliError(describeFailure(first ?? error, target), { cause: first ?? error });
  } finally {
    clearTimeout(timer);
  }
  client.off('error', onError);
  // From here on failures reach the caller's commands; the event only needs a listener.
  client.on('error', () => {});
  return client;
}

async function quit(client: Redis | Cluster): Promise<void> {
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
}

function serverName(info: string): string {
  const valkey = /valkey_version:([^\r\n]+)/.exec(info);
  if (valkey !== null) return `Valkey ${valkey[1]}`;
  const redis = /redis_version:([^\r\n]+)/.exec(info);
  return redis === null ? 'unknown server' : `Redis ${redis[1]}`;
}

/** Runs `command` on every primary and returns the replies in order. */
export function onEveryPrimary(
  connection: Connection,
  command: string,
  ...args: Array<string | number>
): Promise<unknown[]> {
  return Promise.all(connection.primaries.map((node) => node.call(command, ...args)));
}
