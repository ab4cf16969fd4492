// ShouldRateLimit calls per second with 200 in flight: `sluice serve --envoy` on the memory store and on
// Redis, beside a bare grpc-js server answering the same messages with a constant response (the
// transport's ceiling). Each server is its own process; the client is this one.
//
//   node build/bench/envoy.js [--duration-ms 5000] [--in-flight 200]     prints the figures
//   import { envoyBench } from './envoy.js'                               for `npm run bench`
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  loadPackageDefinition,
  Server,
  ServerCredentials,
  type ServiceClientConstructor,
} from '@grpc/grpc-js';
import { fromJSON } from '@grpc/proto-loader';
import { LOADER_OPTIONS } from '../packages/server/src/envoy/grpc.js';
import { PROTO_JSON } from '../packages/server/src/envoy/proto.generated.js';
import { EnvoyClient, type RateLimitRequest } from '../test/helpers/envoy/client.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { count, table } from './format.js';
import type { Section } from './section.js';

const CLI = fileURLToPath(new URL('../packages/server/src/cli/index.js', import.meta.url));
const SELF = fileURLToPath(import.meta.url);

/** Distinct identifiers the calls cycle through, each built per call as a proxy would send it. */
const IDENTIFIERS = 10_000;

const CONFIG = `domain: bench
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 1000000
      # 200 calls in flight on a shared machine can keep Redis past the default 50 ms.
      timeout: 1s
`;

export interface EnvoyBenchOptions {
  /** How long each server is measured, after a warm-up of a quarter of it. @default 5000 */
  readonly durationMs?: number;
  /** Calls in flight at once. @default 200 */
  readonly inFlight?: number;
  /** Rounds over the three servers; each figure is the best. @default 2 */
  readonly rounds?: number;
}

export interface EnvoyBenchResult {
  readonly inFlight: number;
  readonly durationMs: number;
  /** Calls per second answered by each server. */
  readonly bareGrpc: number;
  readonly memory: number;
  readonly redis: number;
  /** memory / bareGrpc: the target is at least 0.7. */
  readonly memoryShareOfCeiling: number;
}

function request(i: number): RateLimitRequest {
  return {
    domain: 'bench',
    descriptors: [{ entries: [{ key: 'remote_address', value: `10.0.${(i >> 8) & 255}.${i & 255}` }] }],
  };
}

/** Runs `inFlight` loops of calls for `ms`; returns the calls answered per second. */
async function drive(client: EnvoyClient, inFlight: number, ms: number): Promise<number> {
  let answered = 0;
  let next = 0;
  const until = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < until) {
        await client.shouldRateLimit(request(next++ % IDENTIFIERS));
        answered++;
      }
    }),
  );
  return Math.round(answered / ((performance.now() - started) / 1000));
}

/** Starts a child and resolves with the gRPC address it prints. */
function startChild(args: readonly string[]): Promise<{ child: ChildProcess; address: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /grpc:\/\/([\d.]+:\d+)/.exec(out);
      if (match !== null) resolve({ child, address: match[1] as string });
    });
    child.once('exit', (code) => reject(new Error(`the server exited (${code}) before listening:\n${out}`)));
  });
}

async function measure(
  args: readonly string[],
  options: { durationMs: number; inFlight: number },
): Promise<number> {
  const { child, address } = await startChild(args);
  const client = new EnvoyClient(address);
  try {
    await drive(client, options.inFlight, options.durationMs / 4);
    return await drive(client, options.inFlight, options.durationMs);
  } finally {
    client.close();
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}

/**
 * The three measurements, one server at a time, in `rounds` alternating rounds; each figure is its
 * best round (the client's own JIT warm-up and a busy machine's spells both pull figures down).
 */
export async function envoyBench(options: EnvoyBenchOptions = {}): Promise<EnvoyBenchResult> {
  const settings = { durationMs: options.durationMs ?? 5000, inFlight: options.inFlight ?? 200 };
  const rounds = options.rounds ?? 2;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-envoy-bench-'));
  writeFileSync(join(dir, 'bench.yaml'), CONFIG);
  const serve = [CLI, 'serve', '--port', '0', '--grpc-port', '0', '--envoy', dir];
  const redis = await startRedis();
  const best = { bareGrpc: 0, memory: 0, redis: 0 };
  try {
    for (let round = 0; round < rounds; round++) {
      best.bareGrpc = Math.max(best.bareGrpc, await measure([SELF, '--bare-server'], settings));
      best.memory = Math.max(best.memory, await measure(serve, settings));
      best.redis = Math.max(best.redis, await measure([...serve, '--redis', redis.url], settings));
    }
  } finally {
    await redis.stop();
  }
  return {
    ...settings,
    ...best,
    memoryShareOfCeiling: Math.round((best.memory / best.bareGrpc) * 100) / 100,
  };
}

/** The ceiling: the same service and messages, answered with one constant response. */
async function bareServer(): Promise<void> {
  const server = new Server();
  const response = {
    overall_code: 1,
    statuses: [
      {
        code: 1,
        current_limit: { name: '', requests_per_unit: 1_000_000, unit: 1 },
        limit_remaining: 999_999,
        duration_until_reset: { seconds: 0, nanos: 500_000_000 },
      },
    ],
    response_headers_to_add: [],
    request_headers_to_add: [],
  };
  const root = loadPackageDefinition(fromJSON(PROTO_JSON as never, LOADER_OPTIONS)) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: ServiceClientConstructor } } } };
  };
  server.addService(root.envoy.service.ratelimit.v3.RateLimitService.service, {
    ShouldRateLimit: (_call: unknown, callback: (error: null, value: unknown) => void) =>
      callback(null, response),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) =>
      error === null ? resolve(bound) : reject(error),
    ),
  );
  process.stdout.write(`bare grpc-js on grpc://127.0.0.1:${port}\n`);
  process.once('SIGTERM', () => server.forceShutdown());
}

/** The share of the bare server's calls/s that `sluice serve --envoy` keeps on the memory store. */
const ENVOY_MEMORY_SHARE = 0.7;

/** `npm run bench`'s section: the three servers, the memory store's share of the ceiling checked. */
export const section: Section<EnvoyBenchResult | null> = {
  name: 'envoy',
  run: ({ quick, filtered, log }) => {
    if (filtered) return Promise.resolve(null);
    log('The Envoy gRPC service: ShouldRateLimit, 200 in flight');
    return envoyBench(quick ? { durationMs: 2000, rounds: 1 } : { durationMs: 5000, rounds: 2 });
  },
  targets: (result) =>
    result === null
      ? []
      : [
          {
            target: `sluice serve --envoy, ShouldRateLimit on the memory store: ≥ ${ENVOY_MEMORY_SHARE}× the calls/s of a bare grpc-js server`,
            measured: `${result.memoryShareOfCeiling.toFixed(2)}× (${count(result.memory)} vs ${count(result.bareGrpc)} calls/s); Redis ${(result.redis / result.bareGrpc).toFixed(2)}×`,
            met: result.memoryShareOfCeiling >= ENVOY_MEMORY_SHARE,
          },
        ],
  render: (result) =>
    result === null
      ? []
      : [
          '## The Envoy gRPC service',
          '',
          `\`sluice serve --envoy\`: ShouldRateLimit calls with ${result.inFlight} in flight from one grpc-js client over 10,000 addresses, ` +
            `each server in a process of its own, beside a bare grpc-js server answering the same messages with a constant response (the transport's ceiling); best of the rounds, ${result.durationMs / 1000} s each.`,
          '',
          table(
            ['server', 'calls/s', '× bare grpc-js'],
            [
              ['bare grpc-js (constant answer)', count(result.bareGrpc), '1.00×'],
              [
                'sluice serve --envoy, memory store',
                count(result.memory),
                `${(result.memory / result.bareGrpc).toFixed(2)}×`,
              ],
              [
                'sluice serve --envoy, Redis store',
                count(result.redis),
                `${(result.redis / result.bareGrpc).toFixed(2)}×`,
              ],
            ],
          ),
          '',
        ],
};

function flag(name: string): number | undefined {
  const at = process.argv.indexOf(name);
  return at === -1 ? undefined : Number(process.argv[at + 1]);
}

if (process.argv[1] === SELF) {
  if (process.argv.includes('--bare-server')) await bareServer();
  else {
    const durationMs = flag('--duration-ms');
    const inFlight = flag('--in-flight');
    const result = await envoyBench({
      ...(durationMs === undefined ? {} : { durationMs }),
      ...(inFlight === undefined ? {} : { inFlight }),
    });
    console.log(JSON.stringify(result, null, 2));
  }
}
