// Connects the two supported clients to a test server, so every suite runs with both.
import { Redis } from 'ioredis';
import { createClient } from 'redis';

export type ClientKind = 'ioredis' | 'node-redis';
export const CLIENT_KINDS: readonly ClientKind[] = ['ioredis', 'node-redis'];

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
  if (kind === 'ioredis') {
    const client = new Redis({
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
