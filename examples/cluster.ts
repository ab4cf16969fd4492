// A Redis Cluster client (ioredis) set up to fail fast in a failover; the limiter is the same as on one server.
// REDIS_CLUSTER_NODES lists some nodes: "127.0.0.1:7000,127.0.0.1:7001".
import { Cluster } from 'ioredis';
import { createLimiter, RedisStore, slidingLog } from 'sluice';

const nodes = (process.env.REDIS_CLUSTER_NODES ?? '127.0.0.1:7000').split(',').map((address) => {
  const [host = '127.0.0.1', port = '6379'] = address.split(':');
  return { host, port: Number(port) };
});
const cluster = new Cluster(nodes, {
  lazyConnect: true,
  enableOfflineQueue: false, // a call for a node that is down fails now, and the limiter's failure policy answers
  retryDelayOnFailover: 0, // a call cut off by a dying node is not sent again: it may have run
  retryDelayOnClusterDown: 0,
});
await cluster.connect();
// Without the offline queue a call to a node whose connection is still opening fails: open them all first.
await Promise.all(cluster.nodes('master').map((node) => node.ping()));

const store = new RedisStore({ client: cluster });
const limiter = createLimiter({ store, policy: slidingLog({ limit: 3, windowMs: 60_000 }), name: 'api' });

// Each identifier's key carries it in braces, so identifiers spread over the primaries by their hash.
for (const user of ['alice', 'bob', 'carol']) {
  const verdicts: string[] = [];
  for (let i = 0; i < 4; i++) verdicts.push((await limiter.limit(user)).allowed ? 'allowed' : 'denied');
  const slot = await cluster.cluster('KEYSLOT', store.keyFor('api', user));
  console.log(`${user} (${store.keyFor('api', user)}, slot ${slot}): ${verdicts.join(', ')}`);
}
await cluster.quit();
