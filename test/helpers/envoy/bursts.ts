// The harness of the burst suites (test/envoy/burst, test/envoy/overload): one hourly rule for one descriptor key, a
// Redis for the suite, and python3-grpcio's burst client (burst.py), an independent client of the service.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { type RedisServer, startRedis } from '../redis-server.js';
import { clearOfWindowEnd } from '../window.js';
import { PROTO_DIR } from './client.js';
import { configDir, HOUR_MS, ROOT } from './support.js';

/** A burst's answers counted by status name: OK, OVER_LIMIT, or the gRPC error (UNAVAILABLE, RESOURCE_EXHAUSTED…). */
export type BurstCounts = Record<string, number>;

/** The key every burst suite's descriptors use. */
export const BURST_KEY = 'user';

/** A config directory with one rule: `limit` calls an hour for each value of the key `user` in `domain`. */
export function hourlyUserConfig(domain: string, limit: number): string {
  return configDir({
    'config.yaml': `domain: ${domain}
descriptors:
  - key: ${BURST_KEY}
    rate_limit:
      unit: hour
      requests_per_unit: ${limit}
`,
  });
}

/**
 * For the enclosing suite: a Redis started before it (and out of the hour's last two minutes, so that no burst's window
 * rolls over) and stopped after it.
 */
export function burstRedis(): () => RedisServer {
  let redis: RedisServer | undefined;
  before(async () => {
    // Raised priority: these suites assert 0 UNAVAILABLE while Redis is up, and on a loaded CI machine a Redis starved
    // of CPU for seconds (measured: 3.6 s waiting to run 102 ms) answers past the 50 ms timeout however the service behaves.
    redis = await startRedis({ priority: -10 });
    await clearOfWindowEnd(HOUR_MS, 120_000);
  });
  after(async () => {
    await redis?.stop();
  });
  return () => redis as RedisServer;
}

/**
 * Runs the Python client against the service at `grpc`: one burst per size, one after the other, all for the descriptor
 * `user: value` in `domain`; the counts of each burst, in order.
 */
export function pythonBursts(
  grpc: string,
  domain: string,
  value: string,
  sizes: readonly number[],
): Promise<BurstCounts[]> {
  const client = join(ROOT, 'test', 'helpers', 'envoy', 'burst.py');
  return new Promise((resolve, reject) => {
    const child = spawn(
      '/usr/bin/python3',
      [client, PROTO_DIR, grpc, domain, BURST_KEY, value, ...sizes.map(String)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
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
            .map((line) => JSON.parse(line) as BurstCounts),
        );
    });
  });
}
