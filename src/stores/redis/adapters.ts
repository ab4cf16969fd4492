// Client adapters: one small interface over ioredis and node-redis, single node or cluster.
import { ERROR_CODES, SluiceError } from '../../errors.js';

/** What the store needs from a client: send one command routed by a key, and reach every primary. */
export interface Commander {
  readonly client: 'ioredis' | 'node-redis';
  readonly cluster: boolean;
  /** Sends one command; on a cluster it goes to the node that owns `key`. */
  send(args: readonly string[], key: string): Promise<unknown>;
  /** Sends one keyless command to every primary (the one server when not a cluster). */
  sendToPrimaries(args: readonly string[]): Promise<unknown[]>;
}

type AnyFunction = (...args: never[]) => unknown;

interface IoRedisLike {
  call(command: string, ...args: string[]): Promise<unknown>;
  isCluster?: boolean;
  nodes?: (role?: string) => IoRedisLike[];
}

interface NodeRedisClientLike {
  sendCommand(args: string[]): Promise<unknown>;
}

interface NodeRedisClusterLike {
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: string[],
  ): Promise<unknown>;
  masters: Array<{ client?: unknown }>;
  nodeClient(node: unknown): NodeRedisClientLike | Promise<NodeRedisClientLike>;
}

interface NodeRedisSentinelLike {
  sendCommand(isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
}

function isFunction(value: unknown): value is AnyFunction {
  return typeof value === 'function';
}

function ioredisCommander(redis: IoRedisLike): Commander {
  const cluster = redis.isCluster === true && isFunction(redis.nodes);
  return {
    client: 'ioredis',
    cluster,
    send: (args) => redis.call(args[0] as string, ...args.slice(1)),
    sendToPrimaries: (args) => {
      const targets = cluster ? (redis.nodes as (role: string) => IoRedisLike[])('master') : [redis];
      return Promise.all(targets.map((node) => node.call(args[0] as string, ...args.slice(1))));
    },
  };
}

function nodeRedisClientCommander(redis: NodeRedisClientLike): Commander {
  return {
    client: 'node-redis',
    cluster: false,
    send: (args) => redis.sendCommand(args as string[]),
    sendToPrimaries: async (args) => [await redis.sendCommand(args as string[])],
  };
}

// createSentinel(): commands go to the primary the sentinels name, and follow it after a failover.
function nodeRedisSentinelCommander(redis: NodeRedisSentinelLike): Commander {
  return {
    client: 'node-redis',
    cluster: false,
    send: (args) => redis.sendCommand(false, args as string[]),
    sendToPrimaries: async (args) => [await redis.sendCommand(false, args as string[])],
  };
}

function nodeRedisClusterCommander(redis: NodeRedisClusterLike): Commander {
  return {
    client: 'node-redis',
    cluster: true,
    send: (args, key) => redis.sendCommand(key, false, args as string[]),
    sendToPrimaries: (args) =>
      Promise.all(
        redis.masters.map(async (master) => (await redis.nodeClient(master)).sendCommand(args as string[])),
      ),
  };
}

/** Recognises the client by its shape, so sluice imports neither library. */
export function toCommander(client: unknown): Commander {
  if (typeof client === 'object' && client !== null) {
    const candidate = client as Record<string, unknown>;
    if (
      isFunction(candidate.call) &&
      isFunction(candidate.sendCommand) &&
      !isFunction(candidate.nodeClient)
    ) {
      return ioredisCommander(client as IoRedisLike);
    }
    if (
      isFunction(candidate.sendCommand) &&
      isFunction(candidate.nodeClient) &&
      Array.isArray(candidate.masters)
    ) {
      return nodeRedisClusterCommander(client as unknown as NodeRedisClusterLike);
    }
    if (isFunction(candidate.sendCommand) && isFunction(candidate.getMasterNode)) {
      return nodeRedisSentinelCommander(client as unknown as NodeRedisSentinelLike);
    }
    if (isFunction(candidate.sendCommand)) {
      return nodeRedisClientCommander(client as unknown as NodeRedisClientLike);
    }
  }
  throw new SluiceError(
    ERROR_CODES.UNSUPPORTED_CLIENT,
    'Expected `RedisStore.client` to be an ioredis client or cluster (new Redis(), new Cluster()) or a node-redis client or cluster (createClient(), createCluster()), got ' +
      (client === null ? 'null' : typeof client) +
      '.',
  );
}
