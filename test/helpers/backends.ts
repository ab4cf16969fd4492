// The three places state can live in the combined-limit and login suites: memory, and a real Redis through each client.
import { MemoryStore, RedisStore, type Store } from '../../src/index.js';
import { type ClientKind, type Connected, connect } from './clients.js';
import type { RedisServer } from './redis-server.js';

export type BackendKind = 'memory' | ClientKind;
export const BACKENDS: readonly BackendKind[] = ['memory', 'ioredis', 'node-redis'];

export interface Backend {
  readonly kind: BackendKind;
  readonly store: Store;
  /** Sends a command to the Redis server behind the store; undefined for memory. */
  readonly redis: Connected | undefined;
  close(): Promise<void>;
}

/** Opens a store of the given kind; Redis kinds connect to `server`. */
export async function openBackend(
  kind: BackendKind,
  server: RedisServer,
  options: { readonly mode?: 'scripts' | 'functions' } = {},
): Promise<Backend> {
  if (kind === 'memory') {
    const store = new MemoryStore();
    return {
      kind,
      store,
      redis: undefined,
      close: async () => store.close(),
    };
  }
  const redis = await connect(kind, server.port);
  const store = new RedisStore({ client: redis.client, ...(options.mode ? { mode: options.mode } : {}) });
  return { kind, store, redis, close: () => redis.close() };
}
