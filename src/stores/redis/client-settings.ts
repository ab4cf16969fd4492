// The client settings sluice expects, checked once per client: a client that queues commands while
// disconnected runs them late, after the limiter has answered for them.

/** The settings sluice expects, by library, as docs/redis.md's table shows them. */
export const EXPECTED_SETTINGS = {
  ioredis: '{ enableOfflineQueue: false, maxRetriesPerRequest: 0 } and a retryStrategy that returns a delay',
  'node-redis': '{ disableOfflineQueue: true } and a socket.reconnectStrategy other than false',
} as const;

type Library = keyof typeof EXPECTED_SETTINGS;

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
}

function ioredisProblems(client: Record<string, unknown>, cluster: boolean): string[] {
  const options = record(client.options);
  if (options === undefined) return [];
  const problems: string[] = [];
  if (options.enableOfflineQueue !== false) {
    problems.push('enableOfflineQueue is not false: commands wait in a queue while the connection is down');
  }
  if (cluster) return problems;
  if (options.maxRetriesPerRequest !== 0) {
    problems.push(
      `maxRetriesPerRequest is ${String(options.maxRetriesPerRequest)}, not 0: commands cut off by a lost connection are sent again after reconnecting`,
    );
  }
  if (typeof options.retryStrategy !== 'function') {
    problems.push('retryStrategy is not a function: the client never reconnects');
  }
  return problems;
}

function nodeRedisProblems(client: Record<string, unknown>, cluster: boolean): string[] {
  // A cluster keeps the options its node clients are made with under `defaults`.
  const options = cluster ? record(record(client._options)?.defaults) : record(client.options);
  if (options === undefined) return [];
  const problems: string[] = [];
  if (options.disableOfflineQueue !== true) {
    problems.push('disableOfflineQueue is not true: commands wait in a queue while the connection is down');
  }
  if (record(options.socket)?.reconnectStrategy === false) {
    problems.push('socket.reconnectStrategy is false: the client never reconnects');
  }
  return problems;
}

/** What is wrong with a client's settings for sluice, in words; empty when nothing is. */
export function clientSettingProblems(client: unknown, library: Library, cluster: boolean): string[] {
  const object = record(client);
  if (object === undefined) return [];
  return library === 'ioredis' ? ioredisProblems(object, cluster) : nodeRedisProblems(object, cluster);
}

const checked = new WeakSet<object>();

/**
 * Emits one process warning per client whose settings would let commands wait behind a dead
 * connection. The limiter's `timeoutMs` still bounds every call; the queue's harm is that commands
 * it holds run after reconnecting and take units for requests that were already answered.
 */
export function warnAboutClientSettings(client: unknown, library: Library, cluster: boolean): void {
  if (typeof client !== 'object' || client === null || checked.has(client)) return;
  checked.add(client);
  const problems = clientSettingProblems(client, library, cluster);
  if (problems.length === 0) return;
  process.emitWarning(
    `sluice: this ${library} client is not set up for rate limiting: ${problems.join('; ')}. Create it with ${EXPECTED_SETTINGS[library]} (see sluice/docs/redis.md#client-settings). Shown once per client.`,
    { type: 'SluiceWarning', code: 'SLUICE_CLIENT_SETTINGS' },
  );
}
