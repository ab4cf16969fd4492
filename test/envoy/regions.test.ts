// Envoy's rules shared across regions: two `serve --envoy --region` services, each with its own redis-server,
// one ledger in a third: a rule's limit is admitted once across both, beyond the floors; each service's
// /metrics shows what its region holds and asks for the rule, and the page passes `promtool check metrics`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { configDir, type EnvoyServe, httpCall, OK, startEnvoyServe } from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const LIMIT = 20;
const CONFIG = `domain: shared
descriptors:
  - key: api
    rate_limit:
      unit: hour
      requests_per_unit: ${LIMIT}
      timeout: 2s
`;

describe('Envoy rules with a budget across regions', () => {
  let global: RedisServer;
  let regionServers: RedisServer[];
  const services: EnvoyServe[] = [];

  before(async () => {
    global = await startRedis();
    regionServers = [await startRedis(), await startRedis()];
  });
  after(async () => {
    await Promise.all(services.map((serve) => serve.stop()));
    await Promise.all([global, ...regionServers].map((server) => server.stop()));
  });

  test("two regions admit a rule's limit once between them, beyond their floors", async () => {
    // The rule's hour window must not end while the regions count to its limit, nor before the next test reads
    // this hour's grants: both services' start, the 80 calls, and the metrics pages checked by promtool.
    await clearOfWindowEnd(3_600_000, 60_000);
    const dir = configDir({ 'shared.yaml': CONFIG });
    for (const [i, region] of ['eu', 'us'].entries()) {
      services.push(
        await startEnvoyServe(dir, [
          '--redis',
          `redis://127.0.0.1:${(regionServers[i] as RedisServer).port}`,
          '--region',
          region,
          '--regions',
          'eu,us',
          '--global-redis',
          `redis://127.0.0.1:${global.port}`,
        ]),
      );
    }
    let admitted = 0;
    for (let i = 0; i < 40; i++) {
      for (const serve of services) {
        const reply = await serve.client.shouldRateLimit(
          { domain: 'shared', descriptors: [{ entries: [{ key: 'api', value: 'client-7' }] }] },
          5000,
        );
        if (reply.overall_code === OK) admitted++;
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // The floors: 10% of 20, one per region; the rest was granted by the ledger.
    assert.ok(admitted <= LIMIT, `admitted ${admitted} of a limit of ${LIMIT}`);
    assert.ok(admitted > 2, `admitted ${admitted}: no more than the floors`);
  });

  test("each region's /metrics shows its budget for the rule, and promtool accepts the page", async () => {
    assert.equal(services.length, 2, 'the services of the previous test');
    let granted = 0;
    for (const [i, region] of ['eu', 'us'].entries()) {
      const page = (await httpCall(`${(services[i] as EnvoyServe).http}/metrics`)).body;
      const series = (name: string): Array<{ labels: string; value: number }> =>
        page
          .split('\n')
          .filter((line) => line.startsWith(`${name}{`))
          .map((line) => ({
            labels: line.slice(name.length, line.lastIndexOf(' ')),
            value: Number(line.slice(line.lastIndexOf(' ') + 1)),
          }));
      // The rule `api` of domain `shared`, by its limiter's name, in this service's region.
      const ofRule = (name: string) =>
        series(name).filter(
          ({ labels }) => labels.includes('shared.api|') && labels.includes(`region="${region}"`),
        );
      assert.equal(
        ofRule('sluice_budget_granted_units').length,
        1,
        `the rule's budget in ${region}:\n${page}`,
      );
      granted += (ofRule('sluice_budget_granted_units')[0] as { value: number }).value;
      assert.equal((ofRule('sluice_budget_identifiers')[0] as { value: number }).value, 1, 'client-7');
      const ok = ofRule('sluice_budget_ledger_calls_total').find(({ labels }) =>
        labels.includes('outcome="ok"'),
      );
      assert.ok((ok?.value ?? 0) > 0, `ledger calls from ${region}: ${ok?.value}`);
      assert.equal((ofRule('sluice_budget_ledger_up')[0] as { value: number }).value, 1);
      // The rule's decisions are counted beside its budget (the Envoy counters count its hits).
      const allowed = series('sluice_decisions_total').find(
        ({ labels }) => labels.includes('shared.api|') && labels.includes('outcome="allowed"'),
      );
      assert.ok((allowed?.value ?? 0) > 0, `decisions of the rule in ${region}`);
      // promtool parses the page (exit 1 otherwise) and lints it (exit 3): it finds nothing to say, the Envoy
      // counters' names included (test/envoy/metrics-page checks the page's names without promtool too).
      const promtool = spawnSync('promtool', ['check', 'metrics'], { input: page, encoding: 'utf8' });
      const complaints = `${promtool.stdout}${promtool.stderr}`.split('\n').filter((line) => line !== '');
      assert.equal(promtool.status, 0, `promtool: ${promtool.status}\n${complaints.join('\n')}`);
      assert.deepEqual(complaints, [], 'promtool finds nothing to say of the page');
    }
    // Both admitted beyond their floors: the ledger granted one of them, at least, for this hour.
    assert.ok(granted > 0, `granted ${granted} units beyond the floors in both regions`);
  });
});
