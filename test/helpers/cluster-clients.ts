// Cluster and Sentinel clients of every library, configured as docs/cluster.md recommends, for the cluster suites.
import { GlideClusterClient } from '@valkey/valkey-glide';
import { Cluster, Redis } from 'ioredis';
import { Valkey, Cluster as ValkeyCluster } from 'iovalkey';
import { createCluster, createSentinel } from 'redis';
import { CLIENT_KINDS, type ClientKind, GLIDE_REQUEST_TIMEOUT_MS, quietGlide } from './clients.js';

/** The libraries that find a primary through Sentinel (Valkey GLIDE does not). */
export const SENTINEL_CLIENT_KINDS: readonly ClientKind[] = CLIENT_KINDS.filter(
  (kind) => kind !== 'valkey-glide',
);

export interface ClusterClient {
  readonly kind: ClientKind;
  /** The client itself, as an application would pass it to RedisStore. */
  readonly client: unknown;
  /** Sends one command to the node that owns `key` (for a naive limiter to race against). */
  send(args: readonly string[], key: string): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * How a client meets a failover, as docs/cluster.md's "Client settings" section describes:
 * - `wait`: the client retries through it (MOVED, CLUSTERDOWN, a dead node) until the new primary
 *   answers; calls take as long as the failover, and few or none fail.
 * - `fail-fast`: a call whose node is down fails at once, for the limiter's `onStoreError` to
 *   decide; only redirections that say the command did not run (MOVED, ASK, TRYAGAIN) are followed.
 */
export type FailoverProfile = 'wait' | 'fail-fast';

/** Connects a cluster client to the seed nodes with the settings of `profile`. */
export async function connectCluster(
  kind: ClientKind,
  rootNodes: ReadonlyArray<{ host: string; port: number }>,
  profile: FailoverProfile = 'wait',
): Promise<ClusterClient> {
  const wait = profile === 'wait';
  if (kind === 'ioredis' || kind === 'iovalkey') {
    // iovalkey is ioredis's fork: the same calls, typed as ioredis's for brevity.
    const Client = (kind === 'ioredis' ? Cluster : ValkeyCluster) as unknown as typeof Cluster;
    const client = new Client(
      rootNodes.map(({ host, port }) => ({ host, port })),
      {
        lazyConnect: true,
        // Limiter state is written by every call: never route to replicas.
        scaleReads: 'master',
        // `wait`: the retry budget (128 x 100 ms) must outlast a failover (about twice cluster-node-timeout),
        // and a slot left half migrated while a busy machine runs eight clients' checks on it.
        // `fail-fast`: 0 turns off resending after "Connection is closed" and CLUSTERDOWN.
        maxRedirections: wait ? 128 : 16,
        retryDelayOnFailover: wait ? 100 : 0,
        retryDelayOnClusterDown: wait ? 100 : 0,
        retryDelayOnTryAgain: 100,
        enableOfflineQueue: wait,
      },
    );
    client.on('error', () => {});
    await client.connect();
    // Without the offline queue, a call to a node whose connection is still opening fails: open them all.
    await Promise.all(client.nodes('master').map((node) => node.ping()));
    return {
      kind,
      client,
      send: (args) => client.call(args[0] as string, ...args.slice(1)),
      close: async () => {
        client.disconnect();
      },
    };
  }
  if (kind === 'valkey-glide') {
    quietGlide();
    // GLIDE follows MOVED and ASK, and refreshes its slots, by itself; a request waits through a
    // failover up to requestTimeout. Fail fast: a short one, so calls for a lost primary fail soon.
    const client = await GlideClusterClient.createClient({
      addresses: rootNodes.map(({ host, port }) => ({ host, port })),
      requestTimeout: wait ? GLIDE_REQUEST_TIMEOUT_MS : 200,
      connectionBackoff: { numberOfRetries: 5, factor: 50, exponentBase: 2 },
    });
    return {
      kind,
      client,
      send: (args, key) =>
        client.customCommand([...args], { route: { type: 'primarySlotKey', key } }) as Promise<unknown>,
      close: async () => {
        client.close();
      },
    };
  }
  const client = createCluster({
    rootNodes: rootNodes.map(({ host, port }) => ({ socket: { host, port } })),
    maxCommandRedirections: 16,
    // Rediscover the topology 300 ms after a node starts reconnecting (default 5000 ms): until then,
    // calls for a dead primary's slots go to it.
    topologyRefreshOnReconnectionAttemptStrategy: 300,
    defaults: {
      disableOfflineQueue: !wait,
      socket: {
        connectTimeout: 1000,
        reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 500),
      },
    },
  });
  client.on('error', () => {});
  await client.connect();
  return {
    kind,
    client,
    send: (args, key) => client.sendCommand(key, false, [...args]),
    close: async () => {
      client.destroy();
    },
  };
}

/**
 * A client that finds the primary through Sentinel: ioredis `new Redis({ sentinels })` or node-redis
 * `createSentinel()`, set up to fail fast while the primary is gone (for the limiter's `onStoreError`).
 */
export async function connectSentinel(
  kind: ClientKind,
  sentinels: ReadonlyArray<{ host: string; port: number }>,
  name: string,
): Promise<ClusterClient> {
  if (kind === 'valkey-glide') throw new Error('Valkey GLIDE does not connect through Sentinel');
  if (kind === 'ioredis' || kind === 'iovalkey') {
    // iovalkey is ioredis's fork: the same calls, typed as ioredis's for brevity.
    const Client = (kind === 'ioredis' ? Redis : Valkey) as unknown as typeof Redis;
    const client = new Client({
      sentinels: sentinels.map(({ host, port }) => ({ host, port })),
      name,
      lazyConnect: true,
      // A call made while the primary is unreachable fails at once, and one cut off is not resent.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: (times: number) => Math.min(times * 50, 500),
      sentinelRetryStrategy: (times: number) => Math.min(times * 50, 500),
      // No failoverDetector: with it, under load, ioredis 6.0.0 sometimes ended the connection for good
      // after the failover (status 'end' in 2 runs of 6); without it, it came back every time, as soon.
    });
    client.on('error', () => {});
    await client.connect();
    return {
      kind,
      client,
      send: (args) => client.call(args[0] as string, ...args.slice(1)),
      close: async () => {
        client.disconnect();
      },
    };
  }
  const client = createSentinel({
    name,
    sentinelRootNodes: sentinels.map(({ host, port }) => ({ host, port })),
    nodeClientOptions: {
      disableOfflineQueue: true,
      socket: {
        connectTimeout: 1000,
        reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 500),
      },
    },
  });
  client.on('error', () => {});
  await client.connect();
  return {
    kind,
    client,
    send: (args) => client.sendCommand(false, [...args]),
    close: async () => {
      await client.destroy();
    },
  };
}
