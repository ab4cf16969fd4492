// Bursts from an independent client (Debian's python3-grpcio, stubs made from the service's own
// .proto files) against `sluice serve --envoy` on Redis, each from a fresh start: every burst lets
// exactly the limit through and answers the rest OVER_LIMIT; none is UNAVAILABLE while Redis is up,
// though the service is busy decoding the burst while Redis answers. With Redis stopped, UNAVAILABLE
// still comes (the store's failure is reported as one).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PROTO_DIR } from '../helpers/envoy/client.js';
import { awayFromWindowEnd, configDir, HOUR_MS, startEnvoyServe } from '../helpers/envoy/support.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const LIMIT = 100;
/** Fresh starts of the service; each takes a burst of 500 and then one of 2,000. */
const STARTS = Number(process.env.SLUICE_BURST_STARTS ?? 3);
const BURSTS = [500, 2000];

const CONFIG = configDir({
  'config.yaml': `domain: burst
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: ${LIMIT}
`,
});

const CLIENT = join(
  fileURLToPath(new URL('.', import.meta.url)),
  '..',
  '..',
  '..',
  'test',
  'helpers',
  'envoy',
  'burst.py',
);

type Counts = Record<string, number>;

/** Runs the Python client: one burst per size, in turn, each for a descriptor value of its own; its counts per burst. */
function pythonBursts(grpc: string, value: string, sizes: readonly number[]): Promise<Counts[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      '/usr/bin/python3',
      [CLIENT, PROTO_DIR, grpc, 'burst', 'user', value, ...sizes.map(String)],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`the Python client exited with ${code}: ${stderr}`));
      else
        resolve(
          stdout
            .trim()
            .split('\n')
            .map((line) => JSON.parse(line) as Counts),
        );
    });
  });
}

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
  await awayFromWindowEnd(HOUR_MS, 120_000);
});
after(async () => {
  await redis.stop();
});

describe('bursts of concurrent ShouldRateLimit calls from python3-grpcio, on Redis', () => {
  for (let start = 0; start < STARTS; start++) {
    test(`fresh start ${start + 1} of ${STARTS}: bursts of ${BURSTS.join(' and ')}, exactly ${LIMIT} OK each, none UNAVAILABLE`, async () => {
      const serve = await startEnvoyServe(CONFIG, ['--redis', redis.url]);
      try {
        // One burst after the other, each for a value of its own: each starts from an empty window.
        const counts = await pythonBursts(serve.grpc, `start-${start}-${Date.now()}`, BURSTS);
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
      const [counts] = await pythonBursts(serve.grpc, `stopped-${Date.now()}`, [200]);
      assert.deepEqual(counts, { UNAVAILABLE: 200 });
    } finally {
      await serve.stop();
    }
  });
});
