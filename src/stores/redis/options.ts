// The options of a RedisStore.
/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * An ioredis or iovalkey client (direct or through Sentinel) or Cluster, a node-redis client,
   * cluster (`createCluster()`) or sentinel (`createSentinel()`), or a Valkey GLIDE `GlideClient`
   * or `GlideClusterClient`, already configured.
   */
  readonly client: unknown;
  /**
   * How long decisions made before the client's first connection wait for it; then the limiter's
   * `timeoutMs` applies. If the server cannot be reached in this time, those decisions (and later
   * ones, until it connects) get the failure policy's answer. Once connected, an outage is never
   * waited for: the failure policy answers within `timeoutMs`.
   * @default 5000
   */
  readonly connectTimeoutMs?: number;
  /**
   * First part of every key: `<prefix>:<limiter name>:{<identifier>}`.
   * @default 'rl'
   */
  readonly prefix?: string;
  /**
   * `scripts` sends EVALSHA (and the body once after NOSCRIPT); `functions` loads a versioned
   * library with FUNCTION LOAD and calls it with FCALL.
   * @default 'scripts'
   */
  readonly mode?: 'scripts' | 'functions';
  /**
   * Decisions that arrive in the same tick share one script call, up to this many keys (each still
   * decided atomically and on its own). 1 turns coalescing off. Smaller calls let the client
   * encode the next while Redis runs the last: with 200 decisions in flight, 32 to 64 keys per
   * call decided the most per second (BENCHMARKS.md), and each call stays well under a millisecond.
   * @default 64
   */
  readonly maxBatch?: number;
}
