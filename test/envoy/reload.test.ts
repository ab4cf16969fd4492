// Hot reload of the Envoy config under load: plain writes, the Kubernetes ConfigMap symlink swap, and a bad file.
import assert from 'node:assert/strict';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, test } from 'node:test';
import {
  configDir,
  configMapDir,
  type EnvoyServe,
  eventually,
  HOUR_MS,
  metric,
  startEnvoyServe,
} from '../helpers/envoy/support.js';
import { clearOfWindowEnd } from '../helpers/window.js';

// Counts are read within one fixed window: no test starts in the last seconds of an hour's.
beforeEach(() => clearOfWindowEnd(HOUR_MS, 10_000));

function config(limit: number): string {
  return `domain: reload\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: hour\n      requests_per_unit: ${limit}\n`;
}

/** Calls ShouldRateLimit from `workers` loops until stopped; counts answers and failures. */
function load(
  serve: EnvoyServe,
  workers: number,
): { stop(): Promise<{ answered: number; failed: unknown[] }> } {
  let running = true;
  let answered = 0;
  const failed: unknown[] = [];
  let next = 0;
  const loops = Array.from({ length: workers }, async () => {
    while (running) {
      try {
        await serve.client.shouldRateLimit({
          domain: 'reload',
          descriptors: [{ entries: [{ key: 'client', value: `c${next++}` }] }],
        });
        answered++;
      } catch (error) {
        failed.push(error);
      }
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return { answered, failed };
    },
  };
}

async function limitInForce(serve: EnvoyServe): Promise<number | undefined> {
  const response = await serve.client.shouldRateLimit({
    domain: 'reload',
    descriptors: [{ entries: [{ key: 'client', value: 'probe' }], hits_addend: { value: 0 } }],
  });
  return response.statuses[0]?.current_limit?.requests_per_unit;
}

describe('hot reload', () => {
  test('20 reloads under load (10 plain writes, 10 ConfigMap swaps): each picked up, no call failed', async () => {
    const plainDir = configDir({ 'limits.yaml': config(1000) });
    const configMap = configMapDir({ 'limits.yaml': config(2000) });
    for (const [where, reload] of [
      [plainDir, (limit: number) => writeFileSync(join(plainDir, 'limits.yaml'), config(limit))],
      [configMap.dir, (limit: number) => configMap.swap({ 'limits.yaml': config(limit) })],
    ] as const) {
      const serve = await startEnvoyServe(where);
      const traffic = load(serve, 8);
      for (let i = 1; i <= 10; i++) {
        const limit = 3000 + i;
        reload(limit);
        await eventually(`limit ${limit} in force`, async () => (await limitInForce(serve)) === limit);
      }
      const { answered, failed } = await traffic.stop();
      assert.deepEqual(failed, []);
      assert.ok(answered > 0);
      assert.ok((await metric(serve.http, 'ratelimit_service_config_load_success_total')) >= 11);
      assert.equal(await serve.stop(), 0);
    }
  });

  test('a bad file on reload keeps the config in force, logs one line, counts it; fixed, it loads', async () => {
    const dir = configDir({ 'limits.yaml': config(7) });
    const serve = await startEnvoyServe(dir);
    // Written whole (then renamed), so that no read can see the file half written and count that too.
    writeFileSync(join(dir, '.limits.tmp'), `${config(8)}      unit_typo: 1\n`);
    renameSync(join(dir, '.limits.tmp'), join(dir, 'limits.yaml'));
    await eventually(
      'the refusal counted',
      async () => (await metric(serve.http, 'ratelimit_service_config_load_error_total')) === 1,
    );
    assert.equal(await limitInForce(serve), 7);
    const lines = serve.running
      .output()
      .stderr.split('\n')
      .filter((line) => line.includes('config not reloaded'));
    assert.deepEqual(lines, [
      `sluice serve: envoy: config not reloaded, the previous one stays in force: ${join(dir, 'limits.yaml')}:7: config error, unknown key 'unit_typo'. See sluice/docs/errors.md#err_sluice_invalid_option`,
    ]);
    writeFileSync(join(dir, 'limits.yaml'), config(9));
    await eventually('the fixed file in force', async () => (await limitInForce(serve)) === 9);
    assert.equal(await metric(serve.http, 'ratelimit_service_config_load_error_total'), 1);
    assert.equal(await serve.stop(), 0);
  });
});
