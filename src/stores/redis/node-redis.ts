// The node-redis adapters: a client (createClient), a cluster (createCluster), a sentinel (createSentinel).
import { type Commander, listenUntilReady, noBroadcast, settleAll } from './commander.js';
import { keySlot } from './slot.js';

interface Readiness {
  readonly isReady?: boolean;
  on(event: string, listener: () => void): unknown;
  off(event: string, listener: () => void): unknown;
}

export interface NodeRedisClientLike extends Readiness {
  sendCommand(args: string[]): Promise<unknown>;
  options?: { url?: string; socket?: { host?: string; port?: number; path?: string } };
}

export interface NodeRedisClusterLike extends Readiness {
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: string[],
  ): Promise<unknown>;
  masters?: unknown[];
  /** Per slot, the shard that serves it: its primary's `address` is `host:port`. */
  slots?: ReadonlyArray<{ readonly master?: { readonly address?: string } } | undefined>;
  nodeClient(node: unknown): NodeRedisClientLike | Promise<NodeRedisClientLike>;
  _options?: { rootNodes?: Array<{ socket?: { host?: string; port?: number }; url?: string }> };
}

export interface NodeRedisSentinelLike extends Readiness {
  sendCommand(isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
}

/** Ready is `isReady`; a cluster says so with 'connect' once it has read the slots, a client with 'ready'. */
function readiness(client: Readiness): Pick<Commander, 'isReady' | 'whenReady'> {
  const isReady = (): boolean => client.isReady === true;
  return {
    isReady,
    whenReady: (listener) => listenUntilReady(client, ['ready', 'connect'], isReady, listener),
  };
}

function clientAddress(client: NodeRedisClientLike): string {
  const { url, socket } = client.options ?? {};
  if (socket?.path !== undefined) return socket.path;
  if (socket?.host !== undefined || socket?.port !== undefined) {
    return `${socket.host ?? 'localhost'}:${socket.port ?? 6379}`;
  }
  if (url !== undefined) {
    try {
      const parsed = new URL(url);
      return `${parsed.hostname}:${parsed.port || 6379}`;
    } catch {
      // An unparsable URL: node-redis will say so itself.
    }
  }
  return 'localhost:6379';
}

export function nodeRedisClientCommander(redis: NodeRedisClientLike): Commander {
  return {
    library: 'node-redis',
    cluster: false,
    address: clientAddress(redis),
    send: (args) => redis.sendCommand(args as string[]),
    sendToOwner: (args) => redis.sendCommand(args as string[]),
    broadcast: noBroadcast,
    ...readiness(redis),
    primaryOf: () => undefined,
  };
}

// createSentinel(): commands go to the primary the sentinels name, and follow it after a failover.
export function nodeRedisSentinelCommander(redis: NodeRedisSentinelLike): Commander {
  return {
    library: 'node-redis',
    cluster: false,
    address: 'the primary named by the sentinels',
    send: (args) => redis.sendCommand(false, args as string[]),
    sendToOwner: (args) => redis.sendCommand(false, args as string[]),
    broadcast: noBroadcast,
    ...readiness(redis),
    primaryOf: () => undefined,
  };
}

export function nodeRedisClusterCommander(redis: NodeRedisClusterLike): Commander {
  const seeds = (redis._options?.rootNodes ?? []).map((node) =>
    node.socket !== undefined ? `${node.socket.host ?? 'localhost'}:${node.socket.port ?? 6379}` : node.url,
  );
  return {
    library: 'node-redis',
    cluster: true,
    address: seeds.length === 0 ? 'the cluster' : `the cluster at ${seeds.join(', ')}`,
    send: (args, key) => redis.sendCommand(key, false, args as string[]),
    sendToOwner: async (args, key) => {
      // A keyless command goes to the node the slot table names for the key.
      const master = redis.slots?.[keySlot(key)]?.master;
      if (master === undefined) throw new Error(`No primary known for ${key}'s slot`);
      return (await redis.nodeClient(master)).sendCommand(args as string[]);
    },
    broadcast: (args) =>
      settleAll(
        (redis.masters ?? []).map(async (master) =>
          (await redis.nodeClient(master)).sendCommand(args as string[]),
        ),
      ),
    ...readiness(redis),
    primaryOf: (slot) => redis.slots?.[slot]?.master?.address,
  };
}
