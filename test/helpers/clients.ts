// Connects each supported client library to a test server, so every store suite runs with each.
import { GlideClient, Logger } from '@valkey/valkey-glide';
import { Redis } from 'ioredis';
import { Valkey } from 'iovalkey';
import { createClient } from 'redis';

export type ClientKind = 'ioredis' | 'node-redis' | 'iovalkey' | 'valkey-glide';
/** Every client library: the store suites (engine, differential, concurrency, failure) run under each. */
export const CLIENT_KINDS: readonly ClientKind[] = ['ioredis', 'node-redis', 'iovalkey', 'valkey-glide'];

/**
 * How long GLIDE holds a request (through reconnections) in the suites: long, so that a busy
 * machine never turns a slow reply into an error in a suite that asserts exact decisions. (The
 * client-settings check warns about it: in production it should not exceed the limiter's timeoutMs.)
 */
export const GLIDE_REQUEST_TIMEOUT_MS = 10_000;

let glideQuiet = false;
/** GLIDE's native core logs every error reply (NOSCRIPT included) as a warning: the suites need none. */
export function quietGlide(): void {
  if (glideQuiet) return;
  glideQuiet = true;
  Logger.setLoggerConfig('off');
}

export interface Connected {
  readonly kind: ClientKind;
  /** The client itself, as an application would pass it to RedisStore. */
  readonly client: unknown;
  /** Sends any command, for assertions. */
  command(...args: Array<string | number>): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * `sluice`: the settings docs/redis.md asks for (no offline queue, no resend after a lost connection),
 * so clients never wait behind a dead connection and sluice does not warn. `library`: each
 * library's own defaults, to show what happens when they are left alone.
 */
export type ClientSettings = 'sluice' | 'library';

export async function connect(
  kind: ClientKind,
  port: number,
  host = '127.0.0.1',
  settings: ClientSettings = 'sluice',
): Promise<Connected> {
  if (kind === 'ioredis' || kind === 'iovalkey') {
    // iovalkey is ioredis's fork: the same calls, typed as ioredis's for brevity.
    const Client = (kind === 'ioredis' ? Redis : Valkey) as unknown as typeof Redis;
    const client = new Client({
      host,
      port,
      lazyConnect: true,
      ...(settings === 'sluice' ? { enableOfflineQueue: false, maxRetriesPerRequest: 0 } : {}),
    });
    client.on('error', () => {});
    await client.connect();
    return {
      kind,
      client,
      command: (...args) => client.call(String(args[0]), ...args.slice(1).map(String)),
      close: async () => {
        client.disconnect();
      },
    };
  }
  if (kind === 'valkey-glide') {
    quietGlide();
    const client = await GlideClient.createClient({
      addresses: [{ host, port }],
      // GLIDE has no offline queue to turn off: it holds a request up to requestTimeout (250 ms by default).
      ...(settings === 'sluice' ? { requestTimeout: GLIDE_REQUEST_TIMEOUT_MS } : {}),
      connectionBackoff: { numberOfRetries: 5, factor: 50, exponentBase: 2 },
    });
    return {
      kind,
      client,
      command: (...args) => client.customCommand(args.map(String)),
      close: async () => {
        client.close();
      },
    };
  }
  const client = createClient({
    socket: { host, port },
    ...(settings === 'sluice' ? { disableOfflineQueue: true } : {}),
  });
  client.on('error', () => {});
  await client.connect();
  return {
    kind,
    client,
    command: (...args) => client.sendCommand(args.map(String)),
    close: async () => {
      client.destroy();
    },
  };
}
