// `sluice audit` on a real Redis Cluster: every primary walked, each finding named with the primary that holds it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseJson, runCli } from '../helpers/cli.js';
import { type RedisCluster, startCluster } from '../helpers/redis-cluster.js';

interface AuditReport {
  server: string;
  scanned: number;
  findings: Array<{ key: string; primary: string; problems: string[] }>;
}

describe('sluice audit on a cluster', () => {
  let cluster: RedisCluster;

  before(async () => {
    cluster = await startCluster();
  });
  after(async () => {
    await cluster?.stop();
  });

  test('finds the keys without an expiry on every primary and says which primary holds each', async () => {
    const seed = cluster.rootNodes[0]?.port as number;
    // Enough identifiers that every primary holds some; a third of them lost their TTL.
    const holder = new Map<string, number>();
    for (let i = 0; i < 30; i++) {
      const key = `rl:api:{customer-${i}}`;
      const slot = Number(await cluster.command(seed, 'CLUSTER', 'KEYSLOT', key));
      const primary = await cluster.primaryOf(slot);
      await cluster.command(primary.port, 'SET', key, '1', ...(i % 3 === 0 ? [] : ['PX', '600000']));
      holder.set(key, primary.port);
    }
    assert.equal(new Set(holder.values()).size, 3, 'the keys are spread over the three primaries');
    const result = await runCli(['audit', '--redis', `127.0.0.1:${seed}`, '--json']);
    assert.equal(result.code, 1, result.stderr);
    const report = parseJson<AuditReport>(result);
    assert.match(report.server, /cluster, 3 primaries$/);
    assert.equal(report.scanned, 30);
    const lost = [...holder.keys()].filter((_, i) => i % 3 === 0);
    assert.deepEqual(report.findings.map((finding) => finding.key).sort(), lost.sort());
    for (const finding of report.findings) {
      assert.equal(finding.primary, `127.0.0.1:${holder.get(finding.key)}`, finding.key);
    }
    const text = await runCli(['audit', '--redis', `127.0.0.1:${seed}`]);
    assert.match(
      text.stdout,
      /\n {2}rl:api:\{customer-0\}\s+on 127\.0\.0\.1:\d+\s+string\s+no TTL\s+no expiry\n/,
    );
  });
});
