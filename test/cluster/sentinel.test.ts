// sluice through Redis Sentinel (a primary, a replica, three sentinels), with ioredis and node-redis: decisions,
// exact bursts, and the primary killed with SIGKILL under load until the sentinels promote the replica.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  createLimiter,
  fixedWindow,
  gcra,
  type Policy,
  RedisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { type ClusterClient, connectSentinel, SENTINEL_CLIENT_KINDS } from '../helpers/cluster-clients.js';
import { type Rig, sleep, summarize, trackedLoads } from '../helpers/failover-load.js';
import { type SentinelDeployment, startSentinel } from '../helpers/redis-sentinel.js';
import { pollUntil } from '../helpers/resp.js';
import { EXACT } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const HOUR = 3_600_000;
const T0 = 1_700_002_800_000;

let deployment: SentinelDeployment;
const clients: ClusterClient[] = [];
const rigs: Rig[] = [];

before(async () => {
  deployment = await startSentinel({ downAfterMs: 1000 });
  for (const kind of SENTINEL_CLIENT_KINDS) {
    for (const mode of ['scripts', 'functions'] as const) {
      const client = await connectSentinel(kind, deployment.sentinelNodes, deployment.name);
      clients.push(client);
      const store = new RedisStore({ client: client.client, mode, prefix: `rl-${kind}-${mode}` });
      rigs.push({ kind, mode, label: `${kind}/${mode}`, store });
    }
  }
});

const trackedLoad = trackedLoads();

after(async () => {
  await Promise.all(clients.map((client) => client.close()));
  await deployment?.stop();
});

const POLICIES: ReadonlyArray<readonly [string, () => Policy]> = [
  ['fixedWindow', () => fixedWindow({ limit: 100, windowMs: HOUR })],
  ['slidingLog', () => slidingLog({ limit: 100, windowMs: HOUR })],
  ['slidingWindow', () => slidingWindow({ limit: 100, windowMs: HOUR })],
  ['tokenBucket', () => tokenBucket({ capacity: 100, refillPerSecond: 100 / 3600 })],
  ['gcra', () => gcra({ limit: 100, periodMs: HOUR })],
];

async function assertExactBursts(rig: Rig, name: string): Promise<void> {
  for (const [label, make] of POLICIES) {
    const limiter = createLimiter({
      ...EXACT,
      store: rig.store,
      policy: make(),
      name: `${name}-${label}`,
      clock: () => T0,
    });
    const decisions = await Promise.all(Array.from({ length: 500 }, () => limiter.limit('hot')));
    assert.equal(decisions.filter((decision) => decision.allowed).length, 100, `${rig.label} ${label}`);
  }
}

test('through Sentinel, both clients are single-node stores and decide exactly (500 at a limit of 100)', async () => {
  for (const rig of rigs) {
    assert.deepEqual(rig.store.client, { library: rig.kind, cluster: false });
    let now = T0;
    const bucket = createLimiter({
      ...EXACT,
      store: rig.store,
      policy: tokenBucket({ capacity: 5, refillPerSecond: 2 }),
      name: 'known-bucket',
      clock: () => now,
    });
    const seen: number[][] = [];
    for (let i = 0; i < 7; i++) {
      const decision = await bucket.limit('42');
      seen.push([decision.allowed ? 1 : 0, decision.remaining]);
    }
    now += 1000;
    const later = await bucket.limit('42');
    seen.push([later.allowed ? 1 : 0, later.remaining]);
    assert.deepEqual(
      seen,
      [
        [1, 4],
        [1, 3],
        [1, 2],
        [1, 1],
        [1, 0],
        [0, 0],
        [0, 0],
        [1, 1],
      ],
      rig.label,
    );
    await assertExactBursts(rig, 'before');
  }
});

test("the primary killed with SIGKILL under load, onStoreError 'deny': the policy denies until the sentinels promote the replica, then decisions come from it", async () => {
  // The hour's window of the load must not end before EXISTS reads its key on the promoted replica (the key
  // expires with it): the failover, the wait for every client (20 s at most) and the checks.
  await clearOfWindowEnd(HOUR, 60_000);
  const [primary, replica] = deployment.servers;
  const identifiers = Array.from({ length: 20 }, (_, i) => `user-${i}`);
  const lastErrors = new Map<string, string>();
  const runs = rigs.map((rig) => {
    // A window of an hour: the keys outlive the test, so where they live can be checked. The default
    // timeoutMs (50 ms), failing closed.
    const limiter = createLimiter({
      onStoreError: 'deny',
      store: rig.store,
      policy: fixedWindow({ limit: 1_000_000, windowMs: HOUR }),
      name: 'killed',
      onError: (error) => {
        lastErrors.set(rig.label, `${error.message} / ${String((error as { cause?: unknown }).cause)}`);
      },
    });
    return { rig, load: trackedLoad({ call: (id) => limiter.limit(id), identifiers, concurrency: 4 }) };
  });
  await sleep(200);
  const killedAt = Date.now();
  await primary.kill('SIGKILL');
  await deployment.waitUntilAgreed(replica.port, { replicaUp: false });
  const promotedAt = Date.now() - killedAt;
  // Keep the load on until every client has decided again, on the new primary.
  await pollUntil(
    'every client to decide again',
    async () => {
      const since = Date.now() - 300;
      return runs.every(({ load }) =>
        load.outcomes.some(
          (outcome) =>
            outcome.decision !== undefined &&
            outcome.decision.reason === undefined &&
            load.startedAt + outcome.sentAt > since,
        ),
      )
        ? true
        : undefined;
    },
    20_000,
  ).catch((error: unknown) => {
    for (const client of clients)
      console.log(`${client.kind} status ${String((client.client as { status?: unknown }).status)}`);
    for (const { rig, load } of runs) {
      const last = load.outcomes.at(-1);
      console.log(
        `${rig.label}: ${load.outcomes.length} calls, last ${JSON.stringify(last)}, last error ${lastErrors.get(rig.label)}`,
      );
    }
    throw error;
  });
  await sleep(300);
  console.log(`Sentinel: all three sentinels name the replica ${promotedAt} ms after the kill`);
  for (const { rig, load } of runs) {
    const outcomes = await load.stop();
    const offset = killedAt - load.startedAt;
    const summary = summarize(outcomes);
    // Recovery: the first call made after the kill that Redis decided.
    const recovered = outcomes.find(
      (outcome) =>
        outcome.sentAt > offset && outcome.decision !== undefined && outcome.decision.reason === undefined,
    );
    assert.ok(recovered !== undefined, rig.label);
    console.log(
      `Sentinel ${rig.label}: ${summary.total} calls, ${summary.errors} errors ${JSON.stringify(summary.codes)}` +
        `${summary.firstErrorAt === undefined ? '' : ` from +${summary.firstErrorAt - offset} to +${(summary.lastErrorAt ?? 0) - offset} ms`}` +
        `, decided again at +${recovered.at - offset} ms, longest wait ${summary.longestWaitMs} ms`,
    );
    // Nothing reached the caller but decisions, and none was allowed without Redis granting it.
    assert.equal(summary.errors, 0, rig.label);
    for (const { decision } of outcomes) {
      if (decision?.reason === undefined) continue;
      assert.equal(decision.allowed, false, JSON.stringify(decision));
    }
    const firstStoreError = outcomes.find((outcome) => outcome.decision?.reason === 'store-error');
    assert.ok(
      firstStoreError === undefined || firstStoreError.at >= offset,
      'no store error before the kill',
    );
    // The state now lives on the promoted replica.
    assert.equal(
      await deployment.command(replica.port, 'EXISTS', rig.store.keyFor('killed', 'user-0')),
      1,
      rig.label,
    );
    await assertExactBursts(rig, 'after');
  }
  // The replica is the primary now, and the old primary is gone.
  assert.equal(((await deployment.command(replica.port, 'ROLE')) as unknown[])[0], 'master');
});
