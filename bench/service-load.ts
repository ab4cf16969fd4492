// `sluice serve` under clients that are not the bottleneck: h2load (nghttp2-client) sends Envoy's
// ShouldRateLimit as one pre-encoded gRPC frame, wrk sends POST /v1/limit; each beside a bare server
// of the same protocol that answers a constant (node:http2 with a constant gRPC frame, node:http with
// the same JSON), on the memory store and on Redis, in alternating rounds. The servers' own CPU time
// (from /proc) gives decisions per second of one core. Loopback only, bounded by call count and time.
//
//   npm run bench:service                 this section alone; merges it into the newest results file and
//                                         regenerates BENCHMARKS.md
//   npm run bench -- --only service-load  the same, printed only
import { type ChildProcess, execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadServices } from '../packages/server/src/envoy/grpc.js';
import { frame } from '../packages/server/src/envoy/grpc-wire.js';
import { count, ms, ratio, table } from './format.js';
import { median } from './load.js';
import type { Section, Target } from './section.js';
import { parseWrk, sample, startProcess, stop, WRK_SCRIPT } from './service.js';

const execute = promisify(execFile);
const CLI = fileURLToPath(new URL('../packages/server/src/cli/index.js', import.meta.url));
const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** h2load: 4 connections × 50 streams, one client thread. */
const H2_CONNECTIONS = 4;
const H2_STREAMS = 50;
/** wrk: 64 keep-alive connections, one thread (as the service section). */
const WRK_CONNECTIONS = 64;

/** The targets of the service (issue 33): shares of the bare server of the same protocol. */
export const SHARES = {
  'grpc.memory': 0.8,
  'grpc.redis': 0.6,
  'http.memory': 0.85,
  'http.redis': 0.7,
} as const;

const ENVOY_CONFIG = `domain: bench
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
`;

export interface LoadRun {
  readonly round: number;
  readonly perSecond: number;
  /** Mean (h2load) or p50 (wrk) latency, ms. */
  readonly latencyMs: number;
  /** p99 latency (wrk only; h2load reports none). */
  readonly p99Ms: number;
  /** CPU seconds the server process used during the run (user + system). */
  readonly serverCpuS: number;
  /** Calls answered in the run. */
  readonly calls: number;
  readonly failed: number;
  /** Load average (1 min) when the run started. */
  readonly load: number;
}

export interface LoadRow {
  readonly id: string;
  readonly protocol: 'grpc' | 'http';
  readonly label: string;
  readonly runs: LoadRun[];
}

export interface ServiceLoadResult {
  readonly date: string;
  readonly cores: number;
  readonly calls: number;
  readonly wrkSeconds: number;
  readonly rows: LoadRow[];
  readonly loadBefore: number;
  readonly loadAfter: number;
  readonly tools: Record<string, string>;
}

/** The grants `sluice serve --envoy` counted for the bench domain so far (its /metrics). */
async function grantsCounted(httpPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  let total = 0;
  for (const match of text.matchAll(
    /^ratelimit_service_rate_limit_within_limit_total\{[^}]*domain="bench"[^}]*\} (\d+)/gm,
  )) {
    total += Number(match[1]);
  }
  return total;
}

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat. */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the file, 12 and 13 after the name; clock ticks of 1/100 s.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** h2load's throughput, mean time per request and failures. */
export function parseH2load(text: string): {
  perSecond: number;
  meanMs: number;
  calls: number;
  failed: number;
} {
  const rate = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(text);
  const requests =
    /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(
      text,
    );
  const time = /time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)/.exec(text);
  const toMs = (value: string, unit: string): number =>
    Number(value) * (unit === 'us' ? 0.001 : unit === 's' ? 1000 : 1);
  const non2xx = /status codes: \d+ 2xx, \d+ 3xx, (\d+) 4xx, (\d+) 5xx/.exec(text);
  return {
    perSecond: rate === null ? Number.NaN : Number(rate[1]),
    meanMs: time === null ? Number.NaN : toMs(time[5] as string, time[6] as string),
    calls: requests === null ? 0 : Number(requests[3]),
    failed:
      requests === null
        ? Number.NaN
        : Number(requests[4]) +
          Number(requests[5]) +
          Number(requests[6]) +
          Number(non2xx?.[1] ?? 0) +
          Number(non2xx?.[2] ?? 0),
  };
}

async function installed(command: string, args: readonly string[]): Promise<string | undefined> {
  try {
    const { stdout } = await execute(command, args);
    return stdout.split('\n')[0]?.trim();
  } catch (error) {
    const out = String((error as { stdout?: string }).stdout ?? '');
    return out === '' ? undefined : out.split('\n')[0]?.trim();
  }
}

interface Target_ {
  readonly id: string;
  readonly protocol: 'grpc' | 'http';
  readonly label: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** The HTTP port whose /metrics counts this gRPC server's grants (sluice only). */
  readonly metricsPort?: number;
}

export const section: Section<ServiceLoadResult | null> = {
  name: 'service-load',
  async run({ quick, filtered, bench, log }) {
    if (filtered) return null;
    const h2load = await installed('h2load', ['--version']);
    const wrk = await installed('wrk', ['--version']);
    if (h2load === undefined || wrk === undefined) {
      log('The service under h2load and wrk: install nghttp2-client and wrk to measure it; not measured');
      return null;
    }
    const calls = quick ? 10_000 : 40_000;
    const wrkSeconds = quick ? 2 : 4;
    const rounds = quick ? 1 : 5;
    const loadBefore = loadavg()[0] as number;
    log(
      `The service under h2load (${calls} calls, ${H2_CONNECTIONS}×${H2_STREAMS} streams) and wrk (${WRK_CONNECTIONS} connections, ${wrkSeconds} s); load ${loadBefore.toFixed(2)}`,
    );
    const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-service-'));
    const children: ChildProcess[] = [];
    try {
      const services = loadServices();
      // The request: one descriptor, as a proxy sends it; encoded once, framed once.
      const requestFile = join(dir, 'request.bin');
      writeFileSync(
        requestFile,
        frame(
          services.shouldRateLimit.requestSerialize({
            domain: 'bench',
            descriptors: [{ entries: [{ key: 'remote_address', value: '10.0.0.1' }] }],
          } as never),
        ),
      );
      const envoyDir = join(dir, 'envoy');
      writeFileSync(join(dir, 'limit.lua'), WRK_SCRIPT);
      mkdirSync(envoyDir);
      writeFileSync(join(envoyDir, 'bench.yaml'), ENVOY_CONFIG);
      const config = join(dir, 'sluice.config.json');
      writeFileSync(
        config,
        JSON.stringify({
          policies: { bench: { algorithm: 'fixedWindow', limit: 1_000_000_000, windowMs: 60_000 } },
        }),
      );
      const redisUrl = `redis://${bench.server.host}:${bench.server.port}`;
      const serve = async (
        extra: readonly string[],
      ): Promise<{ child: ChildProcess; http: number; grpc: number }> => {
        const started = await startProcess(
          process.execPath,
          [
            CLI,
            'serve',
            '--config',
            config,
            '--port',
            '0',
            '--grpc-port',
            '0',
            '--envoy',
            envoyDir,
            ...extra,
          ],
          /http:\/\/[\d.]+:(\d+)[\s\S]*grpc:\/\/[\d.]+:(\d+)|grpc:\/\/[\d.]+:(\d+)[\s\S]*http:\/\/[\d.]+:(\d+)/,
        );
        children.push(started.child);
        const m = started.match;
        return {
          child: started.child,
          http: Number(m[1] ?? m[4]),
          grpc: Number(m[2] ?? m[3]),
        };
      };
      const memory = await serve([]);
      const redis = await serve(['--redis', redisUrl]);
      const answer = await sample(memory.http);
      const bareHttp = await startProcess(
        process.execPath,
        [fileURLToPath(new URL('./bare-server.js', import.meta.url)), JSON.stringify(answer)],
        /listening (\d+)/,
      );
      children.push(bareHttp.child);
      const bareHttpTurn = await startProcess(
        process.execPath,
        [
          fileURLToPath(new URL('./bare-server.js', import.meta.url)),
          JSON.stringify(answer),
          '--at-turn-end',
        ],
        /listening (\d+)/,
      );
      children.push(bareHttpTurn.child);
      // The bare gRPC server's constant: the answer a sluice decision of this rule gives.
      const constant = services.shouldRateLimit.responseSerialize({
        overall_code: 1,
        statuses: [
          {
            code: 1,
            current_limit: { name: '', requests_per_unit: 1_000_000_000, unit: 1 },
            limit_remaining: 999_999_999,
            duration_until_reset: { seconds: 0, nanos: 500_000_000 },
          },
        ],
        response_headers_to_add: [],
        request_headers_to_add: [],
      } as never);
      const bareGrpc = await startProcess(
        process.execPath,
        [
          fileURLToPath(new URL('./bare-grpc-server.js', import.meta.url)),
          Buffer.from(constant).toString('base64'),
        ],
        /listening (\d+)/,
      );
      children.push(bareGrpc.child);
      const bareGrpcTurn = await startProcess(
        process.execPath,
        [
          fileURLToPath(new URL('./bare-grpc-server.js', import.meta.url)),
          Buffer.from(constant).toString('base64'),
          '--at-turn-end',
        ],
        /listening (\d+)/,
      );
      children.push(bareGrpcTurn.child);
      const servers: Target_[] = [
        {
          id: 'grpc.bare',
          protocol: 'grpc',
          label: 'bare node:http2, constant gRPC frame',
          port: Number(bareGrpc.match[1]),
          child: bareGrpc.child,
        },
        {
          id: 'grpc.bare-turn',
          protocol: 'grpc',
          label: "bare node:http2, a turn's answers written together",
          port: Number(bareGrpcTurn.match[1]),
          child: bareGrpcTurn.child,
        },
        {
          id: 'grpc.memory',
          protocol: 'grpc',
          label: 'sluice serve --envoy, memory store',
          port: memory.grpc,
          child: memory.child,
          metricsPort: memory.http,
        },
        {
          id: 'grpc.redis',
          protocol: 'grpc',
          label: 'sluice serve --envoy, Redis store',
          port: redis.grpc,
          child: redis.child,
          metricsPort: redis.http,
        },
        {
          id: 'http.bare',
          protocol: 'http',
          label: 'bare node:http, same JSON answer',
          port: Number(bareHttp.match[1]),
          child: bareHttp.child,
        },
        {
          id: 'http.bare-turn',
          protocol: 'http',
          label: "bare node:http, a turn's answers written together",
          port: Number(bareHttpTurn.match[1]),
          child: bareHttpTurn.child,
        },
        {
          id: 'http.memory',
          protocol: 'http',
          label: 'sluice serve POST /v1/limit, memory store',
          port: memory.http,
          child: memory.child,
        },
        {
          id: 'http.redis',
          protocol: 'http',
          label: 'sluice serve POST /v1/limit, Redis store',
          port: redis.http,
          child: redis.child,
        },
      ];
      const once = async (server: Target_, round: number, warm: boolean): Promise<LoadRun> => {
        const load = loadavg()[0] as number;
        if (server.protocol === 'grpc') {
          const grantsBefore = server.metricsPort === undefined ? 0 : await grantsCounted(server.metricsPort);
          const cpuBefore = cpuSeconds(server.child.pid);
          const { stdout } = await execute(
            'h2load',
            [
              '-n',
              String(warm ? calls / 4 : calls),
              '-c',
              String(H2_CONNECTIONS),
              '-m',
              String(H2_STREAMS),
              '-t',
              '1',
              '-d',
              requestFile,
              '-H',
              'content-type: application/grpc',
              '-H',
              'te: trailers',
              `http://127.0.0.1:${server.port}${PATH}`,
            ],
            { maxBuffer: 1 << 20, timeout: 120_000 },
          );
          const serverCpuS = cpuSeconds(server.child.pid) - cpuBefore;
          const parsed = parseH2load(stdout);
          // h2load sees HTTP statuses only: a call answered with a gRPC error is a 200 to it, so sluice's
          // grants are counted on its own /metrics, and any call not granted is a failure.
          const notGranted =
            server.metricsPort === undefined
              ? 0
              : parsed.calls - ((await grantsCounted(server.metricsPort)) - grantsBefore);
          return {
            round,
            perSecond: parsed.perSecond,
            latencyMs: parsed.meanMs,
            p99Ms: Number.NaN,
            serverCpuS,
            calls: parsed.calls,
            failed: parsed.failed + notGranted,
            load,
          };
        }
        const cpuBefore = cpuSeconds(server.child.pid);
        const { stdout } = await execute(
          'wrk',
          [
            '-t1',
            `-c${WRK_CONNECTIONS}`,
            `-d${warm ? 1 : wrkSeconds}s`,
            '--latency',
            '-s',
            join(dir, 'limit.lua'),
            `http://127.0.0.1:${server.port}/v1/limit`,
          ],
          { maxBuffer: 1 << 20, timeout: 120_000 },
        );
        const parsed = parseWrk(stdout);
        const requests = /(\d+) requests in/.exec(stdout);
        return {
          round,
          perSecond: parsed.requestsPerSecond,
          latencyMs: parsed.p50Ms,
          p99Ms: parsed.p99Ms,
          serverCpuS: cpuSeconds(server.child.pid) - cpuBefore,
          calls: Number(requests?.[1] ?? 0),
          failed: parsed.errors,
          load,
        };
      };
      for (const server of servers) await once(server, -1, true);
      const rows: LoadRow[] = servers.map((s) => ({
        id: s.id,
        protocol: s.protocol,
        label: s.label,
        runs: [],
      }));
      for (let round = 0; round < rounds; round++) {
        for (const protocol of ['grpc', 'http'] as const) {
          const ofKind = servers.filter((s) => s.protocol === protocol);
          // Rotated, so that no server always runs first.
          for (let i = 0; i < ofKind.length; i++) {
            const server = ofKind[(i + round) % ofKind.length] as Target_;
            const run = await once(server, round, false);
            rows.find((r) => r.id === server.id)?.runs.push(run);
            log(
              `  round ${round + 1} ${server.id.padEnd(12)} ${count(run.perSecond).padStart(8)}/s  ${count(run.calls / run.serverCpuS).padStart(8)} per CPU-s  ${ms(run.latencyMs)} ms${run.failed > 0 ? `  ${run.failed} FAILED` : ''}  load ${run.load.toFixed(2)}`,
            );
          }
        }
      }
      await bench.flush();
      return {
        date: new Date().toISOString(),
        cores: cpus().length,
        calls,
        wrkSeconds,
        rows,
        loadBefore,
        loadAfter: loadavg()[0] as number,
        tools: { h2load, wrk: wrk.replace(/ Copyright.*$/, '') },
      };
    } finally {
      await Promise.all(children.map(stop));
      rmSync(dir, { recursive: true, force: true });
    }
  },
  targets(result) {
    if (result === null) return [];
    const targets: Target[] = [];
    for (const [id, share] of Object.entries(SHARES)) {
      const row = result.rows.find((r) => r.id === id);
      const bare = result.rows.find((r) => r.id === `${row?.protocol}.bare`);
      if (row === undefined || bare === undefined) continue;
      const within = ratioWithin(row, bare);
      const what =
        row.protocol === 'grpc'
          ? 'ShouldRateLimit calls/s of a bare node:http2 server answering a constant gRPC frame (h2load)'
          : 'POST /v1/limit requests/s of a bare node:http server (wrk)';
      targets.push({
        target: `${row.label}: ≥ ${share}× the ${what}`,
        measured: `${ratio(within.median)} (rounds ${within.low.toFixed(2)}–${ratio(within.high)})`,
        met: within.median >= share,
      });
    }
    return targets;
  },
  render(result) {
    if (result === null) return ['## The service under h2load and wrk', '', 'Not run in this benchmark.', ''];
    const runs = result.rows[0]?.runs.length ?? 0;
    return [
      '## The service under h2load and wrk',
      '',
      `Finished ${result.date} by \`npm run bench:service\` (load average ${result.loadBefore.toFixed(2)} before, ${result.loadAfter.toFixed(2)} after, ${result.cores} cores; ${result.tools.h2load}; ${result.tools.wrk}). ` +
        `One \`sluice serve --envoy\` process per store (memory, and Redis on the benchmark's redis-server) answers both protocols; each is loaded beside a bare server of the same protocol that decides nothing. ` +
        `gRPC: h2load sends ${count(result.calls)} ShouldRateLimit calls per run over ${H2_CONNECTIONS} connections × ${H2_STREAMS} streams, one pre-encoded request frame (one descriptor), so the client does not encode anything; the bare node:http2 server reads each body and answers one constant response frame with the OK trailers (the platform's limit for this exchange). ` +
        `HTTP: wrk with ${WRK_CONNECTIONS} keep-alive connections for ${result.wrkSeconds} s per run, each request for the next of 10,000 identifiers; the bare node:http server reads the body and repeats the answer sluice gave. ` +
        `Rules allow far more than is sent, so every answer is a grant decided by the store. Each protocol has a second bare server that writes the answers of a turn of the event loop together, in its check phase, as \`sluice serve\` does: the floor for that way of writing (the targets are against the first). Median of ${runs} rounds in which the four servers of a protocol run one after another, rotated; ratios are taken within a round. ` +
        '"per CPU-second" is the calls a run answered divided by the CPU time (user + system, from /proc) the server process used meanwhile: decisions per second of one busy core. The client shares the 2 cores with the server.',
      '',
      table(
        [
          'server',
          'calls/s',
          'range over rounds',
          'per CPU-second',
          'mean (gRPC) or p50 (HTTP) ms',
          'p99 ms',
          '× bare (median per round)',
          '× bare per CPU-second',
          "× bare writing at the turn's end (median per round)",
          'failed',
        ],
        result.rows.map((row) => {
          const bare = result.rows.find((r) => r.id === `${row.protocol}.bare`);
          const bareTurn = result.rows.find((r) => r.id === `${row.protocol}.bare-turn`);
          const rates = row.runs.map((r) => r.perSecond);
          const within = bare === undefined ? undefined : ratioWithin(row, bare);
          const withinTurn = bareTurn === undefined ? undefined : ratioWithin(row, bareTurn);
          return [
            row.label,
            count(median(rates)),
            `${count(Math.min(...rates))}–${count(Math.max(...rates))}`,
            count(perCore(row)),
            ms(median(row.runs.map((r) => r.latencyMs))),
            ms(median(row.runs.map((r) => r.p99Ms))),
            within === undefined
              ? '–'
              : `${ratio(within.median)} (${within.low.toFixed(2)}–${ratio(within.high)})`,
            bare === undefined ? '–' : ratio(perCore(row) / perCore(bare)),
            withinTurn === undefined
              ? '–'
              : `${ratio(withinTurn.median)} (${withinTurn.low.toFixed(2)}–${ratio(withinTurn.high)})`,
            String(row.runs.reduce((sum, r) => sum + r.failed, 0)),
          ];
        }),
      ),
      '',
    ];
  },
};

/** Calls answered per CPU-second of the server: the median over rounds. */
function perCore(row: LoadRow): number {
  return median(row.runs.map((r) => r.calls / r.serverCpuS));
}

/** Calls/s of `row` over `base`, within each round: median and range. */
function ratioWithin(row: LoadRow, base: LoadRow): { median: number; low: number; high: number } {
  const ratios = row.runs.flatMap((run) => {
    const other = base.runs.find((r) => r.round === run.round);
    return other === undefined ? [] : [run.perSecond / other.perSecond];
  });
  return { median: median(ratios), low: Math.min(...ratios), high: Math.max(...ratios) };
}
