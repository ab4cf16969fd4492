// Envoy's rules shared across regions: two `serve --envoy --region` services, each with its own redis-server,
// one ledger in a third: a rule's limit is admitted once across both, beyond the floors.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { configDir, type EnvoyServe, OK, startEnvoyServe } from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

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
});
