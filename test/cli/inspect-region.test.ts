// `sluice inspect --global-redis` reads every kind of budget on real Redis: a region's own state and
// the identifier's ledger in the global store, for a fixed and a sliding window, a token bucket and GCRA.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseJson, runCli, type ServeProcess, startServe, writeConfig } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

/** Deny when the store is slow (a loaded machine): a failure must not pass as an admission. */
const STRICT = { onStoreError: 'deny', timeoutMs: 2000 } as const;
const POLICIES = {
  fixed: { algorithm: 'fixedWindow', limit: 20, windowMs: 600_000, ...STRICT },
  sliding: { algorithm: 'slidingWindow', limit: 20, windowMs: 600_000, ...STRICT },
  bucket: { algorithm: 'tokenBucket', capacity: 20, refillPerSecond: 1, ...STRICT },
  gcra: { algorithm: 'gcra', limit: 20, periodMs: 20_000, burst: 20, ...STRICT },
} as const;

interface Inspected {
  readonly raw: string;
  readonly state: Record<string, number> & { error?: string };
  readonly global: {
    readonly regions: ReadonlyArray<{
      readonly region: string;
      readonly windows: Record<string, { granted: number; demand: number }>;
      readonly leases: ReadonlyArray<{ level: number; expiresAtMs: number }>;
      readonly asked?: { periodStartMs: number; units: number; previousUnits: number };
    }>;
  };
}

describe('sluice inspect --global-redis, for each kind of budget', () => {
  let global: RedisServer;
  let regionRedis: RedisServer;
  let service: ServeProcess;
  const config = writeConfig({ policies: POLICIES, budget: { regions: ['eu', 'us'] } });

  before(async () => {
    global = await startRedis();
    regionRedis = await startRedis();
    service = await startServe([
      '--config',
      config.path,
      '--redis',
      `redis://127.0.0.1:${regionRedis.port}`,
      '--region',
      'eu',
      '--global-redis',
      `redis://127.0.0.1:${global.port}`,
    ]);
    // The windows' counts are read by the tests below: none may end between these calls and the last read.
    await clearOfWindowEnd(600_000, 30_000);
    // 15 calls per policy for one identifier: beyond a region's floor (10% of 20 for two), so it asks the ledger.
    for (let i = 0; i < 15; i++) {
      for (const policy of Object.keys(POLICIES)) {
        await fetch(`${service.base}/v1/limit`, {
          method: 'POST',
          body: JSON.stringify({ policy, key: 'client-7' }),
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  });
  after(async () => {
    service.running.child.kill('SIGTERM');
    await service.running.exited;
    await Promise.all([global, regionRedis].map((server) => server.stop()));
    config.remove();
  });

  async function inspect(policy: string, json: boolean) {
    return runCli([
      'inspect',
      policy,
      'client-7',
      '--config',
      config.path,
      '--redis',
      `redis://127.0.0.1:${regionRedis.port}`,
      '--global-redis',
      `redis://127.0.0.1:${global.port}`,
      ...(json ? ['--json'] : []),
    ]);
  }

  for (const policy of ['bucket', 'gcra'] as const) {
    test(`${policy}: the region's tokens, floor and lease, and the ledger's leases and demand`, async () => {
      const result = await inspect(policy, true);
      assert.equal(result.code, 0, result.stderr);
      const report = parseJson<Inspected>(result);
      assert.equal(report.state.error, undefined, `the region's state is read: ${report.raw}`);
      assert.equal(report.state.floor, 1, "the floor: 10% of the bucket's 20, split between two regions");
      assert.ok((report.state.leased ?? 0) > 0, `a lease beyond the floor: ${JSON.stringify(report.state)}`);
      const [eu, ...others] = report.global.regions;
      assert.equal(eu?.region, 'eu');
      assert.deepEqual(others, [], 'only eu asked');
      assert.ok((eu?.leases.length ?? 0) > 0, 'the ledger holds its lease');
      assert.equal(
        eu?.leases[0]?.level,
        report.state.leased,
        'what the ledger leased is what the region holds',
      );
      assert.ok((eu?.asked?.units ?? 0) + (eu?.asked?.previousUnits ?? 0) > 0, 'the demand it reported');
      const text = await inspect(policy, false);
      assert.match(
        text.stdout,
        /^state {4}[\d.]+ tokens as of .* ago; capacity: floor 1 \+ \d+ leased for /m,
      );
      assert.match(
        text.stdout,
        /^ {2}eu: lease \d+ for .*; asked \d+ in the half lease that began .* ago, \d+ in the one before$/m,
      );
    });
  }

  for (const policy of ['fixed', 'sliding'] as const) {
    test(`${policy} window: the region's window and grant, and the ledger's grants and demand`, async () => {
      const report = parseJson<Inspected>(await inspect(policy, true));
      assert.equal(report.state.error, undefined, `the region's state is read: ${report.raw}`);
      const { count = 0, grant = 0 } = report.state;
      assert.ok(count > 1 && count <= grant, `admitted ${count} of ${grant} held: beyond its floor (1)`);
      assert.equal(
        report.state.previous === undefined,
        policy === 'fixed',
        "a sliding window's previous count",
      );
      const eu = report.global.regions.find((region) => region.region === 'eu');
      assert.ok(
        Object.values(eu?.windows ?? {}).some((window) => window.demand > 0 && window.granted > 0),
        `the ledger's windows: ${JSON.stringify(eu?.windows)}`,
      );
    });
  }
});
