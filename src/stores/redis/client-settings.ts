// The client settings sluice expects, checked once per client: a client that queues commands while
// disconnected runs them late, after the limiter has answered for them.
import type { LimiterDeadline } from '../../types.js';
import type { ClientLibrary } from './commander.js';

/** A reconnect delay beyond this leaves decisions to the failure policy long after the server is back. */
const MAX_BACKOFF_MS = 5000;

const IOREDIS_SETTINGS =
  '{ enableOfflineQueue: false, maxRetriesPerRequest: 0 } and a retryStrategy that returns a delay (a Cluster: { enableOfflineQueue: false, retryDelayOnFailover: 0 })';

/** The settings sluice expects, by library, as docs/redis.md's table shows them. */
export const EXPECTED_SETTINGS: Readonly<Record<ClientLibrary, string>> = {
  ioredis: IOREDIS_SETTINGS,
  iovalkey: IOREDIS_SETTINGS,
  'node-redis': '{ disableOfflineQueue: true } and a socket.reconnectStrategy other than false',
  'valkey-glide': `{ requestTimeout } no longer than the limiter's timeoutMs and a connectionBackoff that stays under ${MAX_BACKOFF_MS} ms`,
};

/** GLIDE's default `requestTimeout`. */
const GLIDE_REQUEST_TIMEOUT_MS = 250;

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
  if (cluster) {
    // A call cut off by a dying primary fails with "Connection is closed."; with a retry delay the
    // Cluster sends it again once the slots are refreshed, though the script may have run: counted twice.
    const delay = options.retryDelayOnFailover;
    if (delay === undefined || (typeof delay === 'number' && delay > 0)) {
      problems.push(
        `retryDelayOnFailover is ${String(delay ?? 100)}, not 0: a call cut off by a dying primary is sent again, and may be counted twice`,
      );
    }
    // With clusterNodeRetryStrategy, node connections reconnect and resend what they had in flight.
    const nodeOptions = record(options.redisOptions) ?? {};
    if (
      typeof options.clusterNodeRetryStrategy === 'function' &&
      nodeOptions.autoResendUnfulfilledCommands !== false
    ) {
      problems.push(
        'clusterNodeRetryStrategy is set and redisOptions.autoResendUnfulfilledCommands is not false: a node that reconnects sends again the calls it had in flight, which may be counted twice',
      );
    }
    return problems;
  }
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

/**
 * GLIDE holds a request through reconnections and retries until `requestTimeout`: one held longer
 * than a limiter waits (its `timeoutMs`) runs after the limiter has answered for it.
 */
function glideTimeoutProblem(client: Record<string, unknown>, limiter: LimiterDeadline): string | undefined {
  const config = record(client.config);
  if (config === undefined) return undefined;
  const requestTimeout =
    typeof config.requestTimeout === 'number' ? config.requestTimeout : GLIDE_REQUEST_TIMEOUT_MS;
  if (requestTimeout <= limiter.timeoutMs) return undefined;
  return `requestTimeout is ${requestTimeout} ms${config.requestTimeout === undefined ? " (GLIDE's default)" : ''}, longer than the timeoutMs of limiter ${JSON.stringify(limiter.name)} (${limiter.timeoutMs} ms): a command GLIDE holds through a reconnection runs after the limiter has answered for it`;
}

function glideProblems(client: Record<string, unknown>): string[] {
  const config = record(client.config);
  if (config === undefined) return [];
  const problems: string[] = [];
  const backoff = record(config.connectionBackoff);
  if (backoff !== undefined) {
    const { factor, exponentBase, numberOfRetries } = backoff;
    if (
      typeof factor === 'number' &&
      typeof exponentBase === 'number' &&
      typeof numberOfRetries === 'number'
    ) {
      const longest = factor * exponentBase ** numberOfRetries;
      if (longest > MAX_BACKOFF_MS) {
        problems.push(
          `connectionBackoff lets reconnect attempts grow to ${Math.round(longest)} ms: the failure policy decides for that long after the server is back`,
        );
      }
    }
  }
  return problems;
}

/**
 * What is wrong with a client's settings for sluice, in words; empty when nothing is. GLIDE's
 * `requestTimeout` depends on the limiters: see {@link warnAboutRequestTimeout}.
 */
export function clientSettingProblems(client: unknown, library: ClientLibrary, cluster: boolean): string[] {
  const object = record(client);
  if (object === undefined) return [];
  if (library === 'node-redis') return nodeRedisProblems(object, cluster);
  if (library === 'valkey-glide') return glideProblems(object);
  return ioredisProblems(object, cluster);
}

const checked = new WeakSet<object>();
const checkedTimeouts = new WeakSet<object>();

function warn(library: ClientLibrary, problems: readonly string[]): void {
  process.emitWarning(
    `sluice: this ${library} client is not set up for rate limiting: ${problems.join('; ')}. Create it with ${EXPECTED_SETTINGS[library]} (see sluice/docs/redis.md#client-settings). Shown once per client.`,
    { type: 'SluiceWarning', code: 'SLUICE_CLIENT_SETTINGS' },
  );
}

/**
 * Emits one process warning per GLIDE client whose `requestTimeout` outlasts the `timeoutMs` of a
 * limiter made on it (the first such limiter is named). Other clients fail fast while disconnected,
 * whatever the limiter waits.
 */
export function warnAboutRequestTimeout(
  client: unknown,
  library: ClientLibrary,
  limiter: LimiterDeadline,
): void {
  if (library !== 'valkey-glide' || typeof client !== 'object' || client === null) return;
  if (checkedTimeouts.has(client)) return;
  const problem = glideTimeoutProblem(client as Record<string, unknown>, limiter);
  if (problem === undefined) return;
  checkedTimeouts.add(client);
  warn(library, [problem]);
}

/**
 * Emits one process warning per client whose settings would let commands wait behind a dead
 * connection. The limiter's `timeoutMs` still bounds every call; the queue's harm is that commands
 * it holds run after reconnecting and take units for requests that were already answered.
 */
export function warnAboutClientSettings(client: unknown, library: ClientLibrary, cluster: boolean): void {
  if (typeof client !== 'object' || client === null || checked.has(client)) return;
  checked.add(client);
  const problems = clientSettingProblems(client, library, cluster);
  if (problems.length > 0) warn(library, problems);
}
