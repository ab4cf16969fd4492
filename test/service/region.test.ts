// `sluice serve --region`: two services, each with its own redis-server, share a policy's limit through a
// ledger in a third; together they admit no more than the limit, more than their floors, and /metrics shows it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseJson, runCli, type ServeProcess, startServe, writeConfig } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const LIMIT = 20;

async function allowed(base: string, key: string): Promise<boolean> {
  const response = await fetch(`${base}/v1/limit`, {
    method: 'POST',
    body: JSON.stringify({ policy: 'api', key }),
  });
  const body = (await response.json()) as { allowed: boolean };
  return body.allowed;
}

describe('sluice serve --region', () => {
  let global: RedisServer;
  let regionServers: RedisServer[];
  let services: ServeProcess[] = [];
  const config = writeConfig({
    // Ten minutes, whose end the test waits out when it is near: what is admitted is one window's.
    // Deny when the store is slow (a loaded machine): a failure must not pass as an admission.
    policies: {
      api: {
        algorithm: 'fixedWindow',
        limit: LIMIT,
        windowMs: 600_000,
        onStoreError: 'deny',
        timeoutMs: 2000,
      },
    },
  });

  before(async () => {
    global = await startRedis();
    regionServers = [await startRedis(), await startRedis()];
  });
  after(async () => {
    for (const service of services) service.running.child.kill('SIGTERM');
    await Promise.all(services.map((service) => service.running.exited));
    await Promise.all([global, ...regionServers].map((server) => server.stop()));
    config.remove();
  });

  test('refuses a region without the global store, or not among the regions (exit 2)', async () => {
    const missing = await runCli(['serve', '--region', 'eu', '--regions', 'eu,us', '--config', config.path]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--global-redis/);
    const stranger = await runCli([
      'serve',
      '--region',
      'ap',
      '--regions',
      'eu,us',
      '--global-redis',
      `redis://127.0.0.1:${global.port}`,
      '--config',
      config.path,
    ]);
    assert.equal(stranger.code, 2);
    assert.match(stranger.stderr, /not one of the regions/);
  });

  test('two regions admit the limit together, never more; the ledger and /metrics show the shares', async () => {
    services = await Promise.all(
      ['eu', 'us'].map((region, i) =>
        startServe([
          '--config',
          config.path,
          '--redis',
          `redis://127.0.0.1:${(regionServers[i] as RedisServer).port}`,
          '--region',
          region,
          '--regions',
          'eu,us',
          '--global-redis',
          `redis://127.0.0.1:${global.port}`,
        ]),
      ),
    );
    assert.match(services[0]?.banner ?? '', /budget: region eu of eu, us, ledger at .*: api shared/);
    // Admitted, granted and asked are one window's: it must not end before inspect has read the ledger.
    await clearOfWindowEnd(600_000, 30_000);
    // Each region asks 40 times, a little apart so that its worker's chunks arrive between calls.
    let admitted = 0;
    for (let i = 0; i < 40; i++) {
      for (const service of services) if (await allowed(service.base, 'client-7')) admitted++;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // Floors alone: 10% of 20, one per region. The rest came from the ledger.
    assert.ok(admitted <= LIMIT, `admitted ${admitted} of a limit of ${LIMIT}`);
    assert.ok(admitted > 2 * 1, `admitted ${admitted}: no more than the floors`);
    const metrics = await (await fetch(`${services[0]?.base}/metrics`)).text();
    assert.match(metrics, /sluice_budget_ledger_calls_total\{limiter="api",region="eu",outcome="ok"\} [1-9]/);
    assert.match(metrics, /sluice_budget_ledger_up\{limiter="api",region="eu"\} 1/);
    assert.match(metrics, /sluice_budget_identifiers\{limiter="api",region="eu"\} 1/);
    const data = (await (await fetch(`${services[0]?.base}/dashboard/data`)).json()) as {
      policies: { name: string; budget: { region: string; kind: string; ledgerUp: boolean } | null }[];
    };
    assert.deepEqual(
      data.policies.map((policy) => [policy.name, policy.budget?.region, policy.budget?.kind]),
      [['api', 'eu', 'fixed']],
    );
    // inspect shows the identifier's ledger: both regions asked, and were granted beyond their floors.
    const inspected = await runCli([
      'inspect',
      'api',
      'client-7',
      '--config',
      config.path,
      '--redis',
      `redis://127.0.0.1:${(regionServers[0] as RedisServer).port}`,
      '--global-redis',
      `redis://127.0.0.1:${global.port}`,
      '--regions',
      'eu,us',
      '--json',
    ]);
    const report = parseJson<{
      global: { regions: { region: string; windows: Record<string, { granted: number; demand: number }> }[] };
    }>(inspected);
    const regions = report.global.regions;
    assert.deepEqual(
      regions.map((region) => region.region),
      ['eu', 'us'],
    );
    // Per window (the next one's shares may be claimed already): the grants and floors within the limit.
    const byWindow = new Map<string, number>();
    for (const region of regions) {
      const windows = Object.entries(region.windows);
      assert.ok(
        windows.some(([, window]) => window.demand > 0),
        `${region.region} reported no demand`,
      );
      for (const [id, window] of windows) byWindow.set(id, (byWindow.get(id) ?? 0) + window.granted);
    }
    const grants = [...byWindow.values()];
    assert.ok(
      grants.some((granted) => granted > 0) && grants.every((granted) => granted + 2 <= LIMIT),
      `granted beyond the floors, per window: ${JSON.stringify([...byWindow])}`,
    );
  });
});
