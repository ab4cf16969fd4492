// The ioredis and iovalkey adapters (the same shape: iovalkey is ioredis's fork), single node or Cluster.
import { type Commander, isFunction, listenUntilReady, noBroadcast, settleAll } from './commander.js';
import { keySlot } from './slot.js';

interface IoRedisLike {
  call(command: string, ...args: string[]): Promise<unknown>;
  status?: string;
  isCluster?: boolean;
  nodes?: (role?: string) => IoRedisLike[];
  /** Cluster: per slot, the node keys (`host:port`) that serve it, the primary first. */
  slots?: ReadonlyArray<readonly string[] | undefined>;
  options?: Record<string, unknown>;
  startupNodes?: unknown[];
  connect?: () => Promise<void>;
  on(event: string, listener: () => void): unknown;
  off(event: string, listener: () => void): unknown;
}

const libraries = new WeakMap<object, 'ioredis' | 'iovalkey'>();

/**
 * iovalkey is ioredis's fork, alike in shape; it alone reads `valkeys://` URLs as TLS. Its option
 * parser is asked about one on a throwaway object (the client is not touched), once per class.
 */
function libraryOf(client: IoRedisLike): 'ioredis' | 'iovalkey' {
  const prototype = Object.getPrototypeOf(client) as { parseOptions?: unknown } | null;
  if (prototype === null) return 'ioredis';
  let library = libraries.get(prototype);
  if (library === undefined) {
    const probe: { options?: { tls?: unknown } } = {};
    try {
      if (typeof prototype.parseOptions === 'function')
        prototype.parseOptions.call(probe, 'valkeys://localhost');
    } catch {
      // Not a parser we know: the ioredis shape is all we can say.
    }
    library = probe.options?.tls === true ? 'iovalkey' : 'ioredis';
    libraries.set(prototype, library);
  }
  return library;
}

function nodeAddress(node: unknown): string | undefined {
  if (typeof node === 'string' || typeof node === 'number') return String(node);
  if (typeof node !== 'object' || node === null) return undefined;
  const { host, port } = node as { host?: unknown; port?: unknown };
  return `${String(host ?? '127.0.0.1')}:${String(port ?? 6379)}`;
}

function describeAddress(redis: IoRedisLike, cluster: boolean): string {
  if (cluster) {
    const seeds = (redis.startupNodes ?? []).map(nodeAddress).filter((a) => a !== undefined);
    return seeds.length === 0 ? 'the cluster' : `the cluster at ${seeds.join(', ')}`;
  }
  const options = redis.options ?? {};
  if (Array.isArray(options.sentinels)) {
    const sentinels = options.sentinels.map(nodeAddress).join(', ');
    return `the primary '${String(options.name)}' named by the sentinels at ${sentinels}`;
  }
  if (typeof options.path === 'string') return options.path;
  return nodeAddress(options) ?? 'the server';
}

/** An adapter over an ioredis or iovalkey client or Cluster (`redis.call` routes by the first key). */
export function ioredisCommander(redis: IoRedisLike): Commander {
  const cluster = redis.isCluster === true && isFunction(redis.nodes);
  let library: 'ioredis' | 'iovalkey' | undefined = cluster ? undefined : libraryOf(redis);
  const masters = (): IoRedisLike[] => (redis.nodes as (role: string) => IoRedisLike[])('master');
  return {
    get library() {
      if (library !== undefined) return library;
      // A Cluster has no option parser of its own; its node connections are made by the library's
      // client class, so the first node tells (before the first connection: ioredis).
      const node = masters()[0];
      if (node === undefined) return 'ioredis';
      library = libraryOf(node);
      return library;
    },
    cluster,
    address: describeAddress(redis, cluster),
    send: (args) => redis.call(args[0] as string, ...args.slice(1)),
    sendToOwner: (args, key) => {
      if (!cluster) return redis.call(args[0] as string, ...args.slice(1));
      // ioredis routes by a command's keys; a keyless one goes to the node the slot table names.
      const owner = redis.slots?.[keySlot(key)]?.[0];
      const node = masters().find((each) => nodeAddress(each.options) === owner);
      if (node === undefined)
        return Promise.reject(new Error(`No connection to the primary of ${key}'s slot`));
      return node.call(args[0] as string, ...args.slice(1));
    },
    broadcast: (args) =>
      cluster
        ? settleAll(masters().map((node) => node.call(args[0] as string, ...args.slice(1))))
        : noBroadcast(),
    isReady: () => redis.status === 'ready',
    whenReady: (listener) => {
      const stop = listenUntilReady(redis, ['ready'], () => redis.status === 'ready', listener);
      // lazyConnect: a client nobody asked to connect yet ('wait') connects now, as a command would make it.
      if (redis.status === 'wait' && isFunction(redis.connect)) redis.connect().catch(() => {});
      return stop;
    },
    primaryOf: (slot) => (cluster ? redis.slots?.[slot]?.[0] : undefined),
  };
}
