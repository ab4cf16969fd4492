// Bursts from an independent client (Debian's python3-grpcio, stubs made from the service's own
// .proto files) against `sluice serve --envoy` on Redis, each from a fresh start: every burst lets
// exactly the limit through and answers the rest OVER_LIMIT; none is UNAVAILABLE while Redis is up,
// though the service is busy decoding the burst while Redis answers. With Redis stopped, UNAVAILABLE
// still comes (the store's failure is reported as one).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { burstRedis, hourlyUserConfig, pythonBursts } from '../helpers/envoy/bursts.js';
import { startEnvoyServe } from '../helpers/envoy/support.js';
import { startRedis } from '../helpers/redis-server.js';

const LIMIT = 100;
/** Fresh starts of the service; each takes a burst of 500 and then one of 2,000. */
const STARTS = Number(process.env.SLUICE_BURST_STARTS ?? 3);
const BURSTS = [500, 2000];

const CONFIG = hourlyUserConfig('burst', LIMIT);
const redis = burstRedis();

describe('bursts of concurrent ShouldRateLimit calls from python3-grpcio, on Redis', () => {
  for (let start = 0; start < STARTS; start++) {
    test(`fresh start ${start + 1} of ${STARTS}: bursts of ${BURSTS.join(' and ')}, exactly ${LIMIT} OK each, none UNAVAILABLE`, async () => {
      const serve = await startEnvoyServe(CONFIG, ['--redis', redis().url]);
      try {
        // One burst after the other, each for a value of its own: each starts from an empty window.
        const counts = await pythonBursts(serve.grpc, 'burst', `start-${start}-${Date.now()}`, BURSTS);
        for (const [burst, size] of BURSTS.entries()) {
          assert.deepEqual(counts[burst], { OK: LIMIT, OVER_LIMIT: size - LIMIT }, `burst of ${size}`);
        }
      } finally {
        await serve.stop();
      }
    });
  }

  test('with Redis stopped, a burst of 200 is answered UNAVAILABLE, not let through', async () => {
    const stopped = await startRedis();
    const serve = await startEnvoyServe(CONFIG, ['--redis', stopped.url]);
    try {
      await stopped.stop();
      const [counts] = await pythonBursts(serve.grpc, 'burst', `stopped-${Date.now()}`, [200]);
      assert.deepEqual(counts, { UNAVAILABLE: 200 });
    } finally {
      await serve.stop();
    }
  });
});
