// Recognises the client library by its shape, so sluice imports none of them, and picks its adapter.
import { ERROR_CODES, SluiceError } from '../../errors.js';
import { type Commander, isFunction } from './commander.js';
import { type GlideLike, glideCommander, isGlideCluster } from './glide.js';
import { ioredisCommander } from './ioredis.js';
import {
  type NodeRedisClientLike,
  type NodeRedisClusterLike,
  type NodeRedisSentinelLike,
  nodeRedisClientCommander,
  nodeRedisClusterCommander,
  nodeRedisSentinelCommander,
} from './node-redis.js';

/** The adapter for an ioredis, iovalkey, node-redis or Valkey GLIDE client, cluster or sentinel. */
export function toCommander(client: unknown): Commander {
  if (typeof client === 'object' && client !== null) {
    const candidate = client as Record<string, unknown>;
    if (
      isFunction(candidate.call) &&
      isFunction(candidate.sendCommand) &&
      !isFunction(candidate.nodeClient)
    ) {
      return ioredisCommander(client as Parameters<typeof ioredisCommander>[0]);
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
    if (isFunction(candidate.customCommand) && isFunction(candidate.invokeScript)) {
      return glideCommander(client as unknown as GlideLike, isGlideCluster(client as unknown as GlideLike));
    }
  }
  throw new SluiceError(
    ERROR_CODES.UNSUPPORTED_CLIENT,
    'Expected `RedisStore.client` to be an ioredis or iovalkey client or Cluster (new Redis(), new Cluster()), a node-redis client, cluster or sentinel (createClient(), createCluster(), createSentinel()) or a Valkey GLIDE client (GlideClient.createClient(), GlideClusterClient.createClient()), got ' +
      (client === null ? 'null' : typeof client) +
      '.',
  );
}
