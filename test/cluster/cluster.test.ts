// sluice on a real 6-node Redis Cluster with ioredis and node-redis: known sequences, a differential
// check against the memory store, the 500-at-100 concurrency test, key spread, and script/function reloads.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Cluster } from 'ioredis';
import {
  all,
  createLimiter,
  ERROR_CODES,
  fixedWindow,
  gcra,
  MemoryStore,
  type Policy,
  RedisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { LIBRARY_NAME, SCRIPTS } from '../../src/stores/redis/scripts.js';
import { keySlot } from '../../src/stores/redis/slot.js';
import { CLIENT_KINDS, type ClientKind } from '../helpers/clients.js';
import { type ClusterClient, connectCluster } from '../helpers/cluster-clients.js';
import { isCode } from '../helpers/errors.js';
import { seeded } from '../helpers/random.js';
import { type RedisCluster, startCluster } from '../helpers/redis-cluster.js';
import { EXACT } from '../helpers/suites.js';

const MODES = ['scripts', 'functions'] as const;
const HOUR = 3_600_000;
/** A fixed instant for injected clocks: a whole hour, so aligned windows start here. */
const T0 = 1_700_002_800_000;

let cluster: RedisCluster;
const clients: ClusterClient[] = [];

before(async () => {
  cluster = await startCluster();
});

after(async () => {
  await Promise.all(clients.map((client) => client.close()));
  await cluster?.stop();
});

async function connect(kind: ClientKind): Promise<ClusterClient> {
  const client = await connectCluster(kind, cluster.rootNodes);
  clients.push(client);
  return client;
}

/** Counts, on each live primary, the keys that start with `pattern`'s prefix. */
async function keysPerPrimary(pattern: string): Promise<Map<number, number>> {
  const primaries = (await cluster.topology()).filter((node) => node.role === 'primary' && !node.failed);
  const counts = new Map<number, number>();
  for (const primary of primaries) {
    let cursor = '0';
    let count = 0;
    do {
      const reply = (await cluster.command(
        primary.port,
        'SCAN',
        cursor,
        'MATCH',
        pattern,
        'COUNT',
        1000,
      )) as [string, string[]];
      cursor = reply[0];
      count += reply[1].length;
    } while (cursor !== '0');
    counts.set(primary.port, count);
  }
  return counts;
}

const POLICIES: ReadonlyArray<{ readonly label: string; readonly make: () => Policy }> = [
  { label: 'fixedWindow', make: () => fixedWindow({ limit: 100, windowMs: HOUR }) },
  { label: 'slidingLog', make: () => slidingLog({ limit: 100, windowMs: HOUR }) },
  { label: 'slidingWindow', make: () => slidingWindow({ limit: 100, windowMs: HOUR }) },
  { label: 'tokenBucket', make: () => tokenBucket({ capacity: 100, refillPerSecond: 100 / 3600 }) },
  { label: 'gcra', make: () => gcra({ limit: 100, periodMs: HOUR }) },
];

for (const kind of CLIENT_KINDS) {
  for (const mode of MODES) {
    describe(`${kind} cluster, ${mode}`, () => {
      let client: ClusterClient;
      let store: RedisStore;
      const tag = `${kind}-${mode}`;

      before(async () => {
        client = await connect(kind);
        store = new RedisStore({ client: client.client, mode, prefix: `rl-${tag}` });
      });

      test('is recognised as a cluster client', () => {
        assert.deepEqual(store.client, { library: kind, cluster: true });
      });

      test('ready() loads the scripts on every primary', async () => {
        const primaries = (await cluster.topology()).filter(
          (node) => node.role === 'primary' && !node.failed,
        );
        const shas = Object.values(SCRIPTS).map((script) => script.sha);
        const loaded = async (port: number): Promise<boolean> =>
          mode === 'scripts'
            ? ((await cluster.command(port, 'SCRIPT', 'EXISTS', ...shas)) as number[]).every(
                (one) => one === 1,
              )
            : JSON.stringify(await cluster.command(port, 'FUNCTION', 'LIST')).includes(LIBRARY_NAME);
        for (const primary of primaries) {
          await cluster.command(primary.port, mode === 'scripts' ? 'SCRIPT' : 'FUNCTION', 'FLUSH');
        }
        await store.ready();
        for (const primary of primaries) assert.ok(await loaded(primary.port), `primary ${primary.port}`);
      });

      test('fixed window: counts 1, 2, 3, 4 with an expiry, on the primary that owns the key', async () => {
        const limiter = createLimiter({
          ...EXACT,
          store,
          policy: fixedWindow({ limit: 100, windowMs: 60_000 }),
          name: 'known-fixed',
          clock: () => T0,
        });
        const remaining: number[] = [];
        for (let i = 0; i < 4; i++) remaining.push((await limiter.limit('u1')).remaining);
        assert.deepEqual(
          remaining.map((left) => 100 - left),
          [1, 2, 3, 4],
        );
        const key = store.keyFor('known-fixed', 'u1');
        const owner = await cluster.primaryOf(keySlot(key));
        const pttl = (await cluster.command(owner.port, 'PTTL', key)) as number;
        assert.ok(pttl > 0 && pttl <= 60_000, `PTTL ${pttl}`);
      });

      test('sliding log: at 0, 100, 200, 300, 59999, 60001, 60150 ms -> 1, 1, 1, 0, 0, 1, 1', async () => {
        let now = T0;
        const limiter = createLimiter({
          ...EXACT,
          store,
          policy: slidingLog({ limit: 3, windowMs: 60_000 }),
          name: 'known-log',
          clock: () => now,
        });
        const allowed: number[] = [];
        for (const at of [0, 100, 200, 300, 59_999, 60_001, 60_150]) {
          now = T0 + at;
          allowed.push((await limiter.limit('u1')).allowed ? 1 : 0);
        }
        assert.deepEqual(allowed, [1, 1, 1, 0, 0, 1, 1]);
      });

      test('token bucket: 5 at 2/s -> [1,4] [1,3] [1,2] [1,1] [1,0] [0,0] [0,0], then [1,1] a second later', async () => {
        let now = T0;
        const limiter = createLimiter({
          ...EXACT,
          store,
          policy: tokenBucket({ capacity: 5, refillPerSecond: 2 }),
          name: 'known-bucket',
          clock: () => now,
        });
        const seen: Array<[number, number]> = [];
        for (let i = 0; i < 7; i++) {
          const decision = await limiter.limit('42');
          seen.push([decision.allowed ? 1 : 0, decision.remaining]);
        }
        assert.deepEqual(seen, [
          [1, 4],
          [1, 3],
          [1, 2],
          [1, 1],
          [1, 0],
          [0, 0],
          [0, 0],
        ]);
        now += 1000;
        const later = await limiter.limit('42');
        assert.deepEqual([later.allowed ? 1 : 0, later.remaining], [1, 1]);
      });

      for (const { label, make } of POLICIES) {
        test(`${label}: decisions equal the memory store's over a random timeline (coalesced per slot)`, async () => {
          const { next } = seeded(
            label.length * 7919 + CLIENT_KINDS.indexOf(kind) + 1 + (mode === 'scripts' ? 10 : 20),
          );
          let now = T0;
          const clock = () => now;
          const policy = make();
          const name = `diff-${label}`;
          const redis = createLimiter({ ...EXACT, store, policy, name, clock });
          const memory = createLimiter({ ...EXACT, store: new MemoryStore({ clock }), policy, name, clock });
          const identifiers = Array.from({ length: 24 }, (_, i) => `user:${i}`);
          const operations = ['limit', 'limit', 'limit', 'peek', 'refund'] as const;
          let compared = 0;
          for (let step = 0; step < 120; step++) {
            now += Math.floor(next() * next() * policy.windowMs * 0.2);
            // One operation per step: requests of one tick are decided in arrival order per operation.
            const operation = operations[Math.floor(next() * operations.length)] ?? 'limit';
            const batch = Array.from({ length: 1 + Math.floor(next() * 12) }, () => ({
              identifier: identifiers[Math.floor(next() * identifiers.length)] as string,
              cost: 1 + Math.floor(next() * next() * 20),
            }));
            const call = (limiter: typeof redis, identifier: string, cost: number) =>
              operation === 'refund'
                ? limiter.refund(identifier, cost)
                : limiter[operation](identifier, { cost });
            const fromRedis = await Promise.all(
              batch.map(({ identifier, cost }) => call(redis, identifier, cost)),
            );
            const fromMemory = await Promise.all(
              batch.map(({ identifier, cost }) => call(memory, identifier, cost)),
            );
            assert.deepEqual(fromRedis, fromMemory, `step ${step}, ${operation} ${JSON.stringify(batch)}`);
            compared += batch.length;
          }
          assert.ok(compared > 500, `${compared} decisions compared`);
        });
      }

      for (const { label, make } of POLICIES) {
        test(`${label}: 500 concurrent requests from 5 clients at a limit of 100 -> exactly 100 allowed`, async () => {
          const policy = make();
          // Five connections, as five application servers would have; server clock unless the window is aligned.
          const peers = await Promise.all(Array.from({ length: 4 }, () => connect(kind)));
          const stores = [
            store,
            ...peers.map((peer) => new RedisStore({ client: peer.client, mode, prefix: `rl-${tag}` })),
          ];
          const aligned = label === 'fixedWindow' || label === 'slidingWindow';
          const limiters = stores.map((each) =>
            createLimiter({
              ...EXACT,
              store: each,
              policy,
              name: `burst-${label}`,
              ...(aligned ? { clock: () => T0 } : {}),
            }),
          );
          const decisions = await Promise.all(
            Array.from({ length: 500 }, (_, i) =>
              (limiters[i % limiters.length] as (typeof limiters)[0]).limit('hot'),
            ),
          );
          assert.equal(decisions.filter((decision) => decision.allowed).length, 100);
          assert.ok(decisions.every((decision) => decision.reason === undefined));
        });
      }

      test('a naive GET-then-INCR limiter over the same 5 connections lets more than 100 through (so this harness can fail)', async () => {
        const peers = await Promise.all(Array.from({ length: 5 }, () => connect(kind)));
        const key = `naive-${tag}:{hot}`;
        const send = (peer: ClusterClient, args: string[]): Promise<unknown> => peer.send(args, key);
        const naive = async (peer: ClusterClient): Promise<boolean> => {
          const count = Number((await send(peer, ['GET', key])) ?? 0);
          if (count >= 100) return false;
          await send(peer, ['INCR', key]);
          await send(peer, ['PEXPIRE', key, '60000']);
          return true;
        };
        // Connected to the key's node first, so the 500 calls race rather than queue behind a connect.
        await Promise.all(peers.map((peer) => send(peer, ['GET', key])));
        const results = await Promise.all(
          Array.from({ length: 500 }, (_, i) => naive(peers[i % 5] as ClusterClient)),
        );
        assert.ok(results.filter(Boolean).length > 100, `${results.filter(Boolean).length} allowed`);
      });

      test('identifiers spread over all three primaries', async () => {
        const limiter = createLimiter({
          ...EXACT,
          store,
          policy: gcra({ limit: 10, periodMs: HOUR }),
          name: 'spread',
        });
        const count = 600;
        const decisions = await Promise.all(
          Array.from({ length: count }, (_, i) => limiter.limit(`client-${i}`)),
        );
        assert.ok(decisions.every((decision) => decision.allowed));
        const perPrimary = await keysPerPrimary(`rl-${tag}:spread:*`);
        const counts = [...perPrimary.values()];
        assert.equal(counts.length, 3);
        assert.equal(
          counts.reduce((sum, value) => sum + value, 0),
          count,
        );
        // Each primary serves a third of the slots: each holds a fair share, none is a hot spot.
        for (const value of counts) assert.ok(value > count / 6, `keys per primary: ${counts.join(', ')}`);
        console.log(`${tag}: ${count} identifiers -> keys per primary ${counts.join(' / ')}`);
      });

      test('all() with a shared tag across tenant and user (keys rl:user:{tenant:9}:... and rl:tenant:{tenant:9}:...): one slot, one primary, atomic under 500 concurrent requests from 5 clients', async () => {
        const tenant9 = { tag: 'tenant:9' };
        const clock = () => T0;
        const users = ['u1', 'u2', 'u3', 'u4', 'u5'];
        // Five connections, each with its own store and limiters of the same names: five application servers.
        const peers = await Promise.all(Array.from({ length: 4 }, () => connect(kind)));
        const stores = [
          store,
          ...peers.map((peer) => new RedisStore({ client: peer.client, mode, prefix: `rl-${tag}` })),
        ];
        const pairs = stores.map((each) => {
          const user = createLimiter({
            ...EXACT,
            store: each,
            policy: slidingLog({ limit: 100, windowMs: HOUR }),
            name: 'all-user',
            clock,
          });
          const tenant = createLimiter({
            ...EXACT,
            store: each,
            policy: fixedWindow({ limit: 150, windowMs: HOUR }),
            name: 'all-tenant',
            clock,
          });
          return { user, tenant, both: all([user, tenant]) };
        });
        const [first] = pairs as [(typeof pairs)[number]];
        assert.equal(first.both.atomic, true);
        const tenantKey = store.keyFor('all-tenant', '9', 'tenant:9');
        const userKeys = users.map((id) => store.keyFor('all-user', id, 'tenant:9'));
        assert.ok(userKeys.every((key) => keySlot(key) === keySlot(tenantKey)));
        const requests: Array<Promise<[string, boolean]>> = [];
        for (let i = 0; i < 500; i++) {
          const id = users[i % users.length] as string;
          const pair = pairs[Math.floor(i / users.length) % pairs.length] as (typeof pairs)[number];
          requests.push(pair.both.limit([id, '9'], tenant9).then((decision) => [id, decision.allowed]));
        }
        const results = await Promise.all(requests);
        const passed = new Map(users.map((id) => [id, 0]));
        for (const [id, allowed] of results) if (allowed) passed.set(id, (passed.get(id) ?? 0) + 1);
        assert.equal(
          [...passed.values()].reduce((sum, n) => sum + n, 0),
          150,
          'exactly the tenant limit passed',
        );
        assert.equal((await first.tenant.peek('9', tenant9)).remaining, 0);
        for (const id of users) {
          // A request the tenant denied took nothing from its user.
          assert.equal((await first.user.peek(id, tenant9)).remaining, 100 - (passed.get(id) ?? 0));
        }
        // Every key of the tag lives on the one primary that serves its slot.
        const owner = await cluster.primaryOf(keySlot(tenantKey));
        const written = [tenantKey, ...userKeys.filter((_, i) => (passed.get(users[i] as string) ?? 0) > 0)];
        for (const key of written) assert.equal(await cluster.command(owner.port, 'EXISTS', key), 1);
      });

      test('all() over keys of different slots is refused with ERR_SLUICE_CROSS_SLOT, nothing written on any primary', async () => {
        const user = createLimiter({
          ...EXACT,
          store,
          policy: gcra({ limit: 10, periodMs: HOUR }),
          name: 'cross-user',
        });
        const tenant = createLimiter({
          ...EXACT,
          store,
          policy: gcra({ limit: 10, periodMs: HOUR }),
          name: 'cross-tenant',
        });
        const userKey = store.keyFor('cross-user', '42');
        const tenantKey = store.keyFor('cross-tenant', '9');
        const [userOwner, tenantOwner] = [
          await cluster.primaryOf(keySlot(userKey)),
          await cluster.primaryOf(keySlot(tenantKey)),
        ];
        assert.notEqual(keySlot(userKey), keySlot(tenantKey));
        const both = all([user, tenant]);
        for (const operation of ['limit', 'peek'] as const) {
          await assert.rejects(both[operation](['42', '9']), isCode(ERROR_CODES.CROSS_SLOT));
        }
        assert.equal(await cluster.command(userOwner.port, 'EXISTS', userKey), 0);
        assert.equal(await cluster.command(tenantOwner.port, 'EXISTS', tenantKey), 0);
        // Side by side instead (atomic: false), the same pair is decided, each key on its own primary.
        const apart = all([user, tenant], { atomic: false });
        assert.equal((await apart.limit(['42', '9'])).allowed, true);
        assert.equal(await cluster.command(userOwner.port, 'EXISTS', userKey), 1);
        assert.equal(await cluster.command(tenantOwner.port, 'EXISTS', tenantKey), 1);
      });

      test('a primary that lost the script or library reloads it there, and only there', async () => {
        const limiter = createLimiter({
          ...EXACT,
          store,
          policy: gcra({ limit: 10, periodMs: HOUR }),
          name: 'reload',
        });
        // One identifier per primary, so each primary has seen the script or library.
        const primaries = (await cluster.topology()).filter((node) => node.role === 'primary');
        const owned = new Map<number, string>();
        for (let i = 0; owned.size < primaries.length; i++) {
          const identifier = `reload-${i}`;
          const owner = await cluster.primaryOf(keySlot(store.keyFor('reload', identifier)));
          if (!owned.has(owner.port)) owned.set(owner.port, identifier);
        }
        for (const identifier of owned.values())
          assert.equal((await limiter.limit(identifier)).allowed, true);
        const [victimPort, victimIdentifier] = [...owned.entries()][0] as [number, string];
        const loaded = async (port: number): Promise<boolean> => {
          if (mode === 'scripts') {
            return ((await cluster.command(port, 'SCRIPT', 'EXISTS', SCRIPTS.gcra.sha)) as number[])[0] === 1;
          }
          const list = (await cluster.command(
            port,
            'FUNCTION',
            'LIST',
            'LIBRARYNAME',
            LIBRARY_NAME,
          )) as unknown[];
          return list.length > 0;
        };
        for (const port of owned.keys()) assert.equal(await loaded(port), true, `loaded on ${port}`);
        await cluster.command(victimPort, mode === 'scripts' ? 'SCRIPT' : 'FUNCTION', 'FLUSH');
        assert.equal(await loaded(victimPort), false);
        const callsBefore = store.calls;
        const decision = await limiter.limit(victimIdentifier);
        assert.equal(decision.allowed, true);
        assert.equal(decision.remaining, 8);
        // The failed call, then the reload's retry: one decision, counted once.
        assert.equal(store.calls - callsBefore, 2);
        assert.equal(await loaded(victimPort), true);
      });
    });
  }
}

test('ioredis: a NOSCRIPT wrapped in "Too many Cluster redirections" still reloads the script on that node', async () => {
  // maxRedirections 0 makes ioredis wrap the first error, as it wraps the last one after a long failover.
  const ioredis = new Cluster(
    cluster.rootNodes.map(({ host, port }) => ({ host, port })),
    { maxRedirections: 0, lazyConnect: true },
  );
  ioredis.on('error', () => {});
  await ioredis.connect();
  try {
    const store = new RedisStore({ client: ioredis, prefix: 'rl-wrapped' });
    const limiter = createLimiter({
      ...EXACT,
      store,
      policy: gcra({ limit: 5, periodMs: HOUR }),
      name: 'wrapped',
    });
    const owner = await cluster.primaryOf(keySlot(store.keyFor('wrapped', 'a')));
    // Loaded first (as a limiter's first decision waits for), then flushed: the call meets NOSCRIPT.
    await store.ready();
    await cluster.command(owner.port, 'SCRIPT', 'FLUSH');
    const decision = await limiter.limit('a');
    assert.equal(decision.allowed, true);
    assert.equal(decision.remaining, 4);
    assert.equal(store.calls, 2);
  } finally {
    ioredis.disconnect();
  }
});
