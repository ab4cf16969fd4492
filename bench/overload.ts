// Overload: `sluice serve --envoy` offered about 5x its capacity for 10 s, with its guard and with --no-shed.
// gRPC: h2load (nghttp2-client) with a pre-encoded request; its capacity is measured first (closed loop, 4 x 50
// streams), then arrivals are offered open loop (--rps per connection) at 5x that, while a probe on a connection of
// its own calls 200 times a second and records each call's status and latency (h2load cannot tell an answer from a
// trailers-only refusal: both are HTTP 200). HTTP: wrk on POST /v1/limit, 64 connections, then 5x as many.
// Refusals are read from the service's own sluice_service_shed_total.
//
// --bare also offers the same load to a bare node:http2 server answering a constant frame (no sluice): what the
// probe then measures is the machine's and HTTP/2's share of an answered call's wait.
//
//   node build/bench/overload.js [--redis] [--seconds 10] [--factor 5] [--bare]
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:http2';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadServices } from '../packages/server/src/envoy/grpc.js';
import { frame } from '../packages/server/src/envoy/grpc-wire.js';
import { startRedis } from '../test/helpers/redis-server.js';

const CLI = fileURLToPath(new URL('../packages/server/src/cli/index.js', import.meta.url));
const METHOD = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const argv = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const at = argv.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(argv[at + 1]);
};
const SECONDS = flag('seconds', 10);
const FACTOR = flag('factor', 5);
const USE_REDIS = argv.includes('--redis');
/** Guard flags to measure beside the defaults, e.g. --guard "--shed-streams 32". */
const GUARD_ARGS = argv.includes('--guard') ? String(argv[argv.indexOf('--guard') + 1]).split(' ') : [];
const SKIP_OFF = argv.includes('--skip-off');
const BARE = argv.includes('--bare');
const PROBE_PER_SECOND = 200;
/** h2load's connections: Envoy opens another when one holds as many calls as the server allows. */
const CONNECTIONS = flag('connections', 10);

const dir = mkdtempSync(join(tmpdir(), 'sluice-overload-'));
const envoyConfig = join(dir, 'envoy.yaml');
writeFileSync(
  envoyConfig,
  `domain: load
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
`,
);
const policies = join(dir, 'sluice.config.json');
writeFileSync(
  policies,
  JSON.stringify({ policies: { api: { algorithm: 'fixedWindow', limit: 1_000_000_000, windowMs: 60_000 } } }),
);
const requestFile = join(dir, 'request.bin');
const request = frame(
  loadServices().shouldRateLimit.requestSerialize({
    domain: 'load',
    descriptors: [{ entries: [{ key: 'user', value: 'overload' }] }],
  } as never),
);
writeFileSync(requestFile, request);
const luaFile = join(dir, 'post.lua');
writeFileSync(
  luaFile,
  `wrk.method = "POST"\nwrk.body = '{"policy":"api","key":"overload"}'\nwrk.headers["Content-Type"] = "application/json"\n`,
);

interface Serve {
  readonly child: ChildProcess;
  readonly http: string;
  readonly grpc: string;
}

function serve(args: readonly string[]): Promise<Serve> {
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--port', '0', '--grpc-port', '0', '--config', policies, '--envoy', envoyConfig, ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk;
      const http = /listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
      const grpc = /grpc:\/\/([\d.]+:\d+)/.exec(out)?.[1];
      if (http !== undefined && grpc !== undefined) resolve({ child, http, grpc });
    });
    child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(chunk));
    child.on('exit', (code) => reject(new Error(`sluice serve exited with ${code}: ${out}`)));
  });
}

/** A bare node:http2 server answering the constant frame (bench/bare-grpc-server.ts), as a Serve without HTTP. */
function bare(): Promise<Serve> {
  const constant = loadServices().shouldRateLimit.responseSerialize({
    overall_code: 1,
    statuses: [{ code: 1 }],
  } as never);
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('./bare-grpc-server.js', import.meta.url)),
      Buffer.from(constant).toString('base64'),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      const port = /listening (\d+)/.exec(String(chunk))?.[1];
      if (port !== undefined) resolve({ child, http: '', grpc: `127.0.0.1:${port}` });
    });
    child.on('exit', (code) => reject(new Error(`the bare server exited with ${code}`)));
  });
}

async function stop(running: Serve): Promise<void> {
  running.child.removeAllListeners('exit');
  const exited = new Promise((resolve) => running.child.once('exit', resolve));
  running.child.kill('SIGTERM');
  await exited;
}

function run(command: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { maxBuffer: 64 * 1024 * 1024 }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
  });
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

interface H2load {
  readonly perSecond: number;
  readonly done: number;
  readonly failed: number;
  /** Of every call, answered or refused, in ms. */
  readonly p50Ms: number;
  readonly p99Ms: number;
}

async function h2load(grpc: string, args: readonly string[], seconds: number): Promise<H2load> {
  const log = join(dir, `h2load-${Date.now()}.log`);
  const out = await run('h2load', [
    ...args,
    '-D',
    String(seconds),
    '--warm-up-time',
    '1',
    '--log-file',
    log,
    '-d',
    requestFile,
    '-H',
    'content-type: application/grpc',
    '-H',
    'te: trailers',
    `http://${grpc}${METHOD}`,
  ]);
  const perSecond = Number(/finished in [\d.]+s, ([\d.]+) req\/s/.exec(out)?.[1]);
  const done = Number(/(\d+) done/.exec(out)?.[1]);
  const failed = Number(/(\d+) failed/.exec(out)?.[1]);
  const micros = readFileSync(log, 'utf8')
    .trim()
    .split('\n')
    .map((line) => Number(line.split('\t')[2]) / 1000)
    .sort((a, b) => a - b);
  return { perSecond, done, failed, p50Ms: quantile(micros, 0.5), p99Ms: quantile(micros, 0.99) };
}

interface Probe {
  readonly byStatus: Record<string, number>;
  /** Of the answered calls (grpc-status 0), in ms. */
  readonly answeredP50Ms: number;
  readonly answeredP99Ms: number;
  readonly refusedP99Ms: number;
}

/** Calls at a steady rate on a connection of its own, each timed from the moment it was due. */
function probe(grpc: string, seconds: number): Promise<Probe> {
  const session = connect(`http://${grpc}`);
  session.on('error', () => {});
  const answered: number[] = [];
  const refused: number[] = [];
  const byStatus: Record<string, number> = {};
  const calls: Promise<void>[] = [];
  const startMs = performance.now();
  const total = seconds * PROBE_PER_SECOND;
  return new Promise((resolve) => {
    let sent = 0;
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - startMs) / 1000) * PROBE_PER_SECOND));
      for (; sent < due; sent++) {
        const dueMs = startMs + (sent * 1000) / PROBE_PER_SECOND;
        calls.push(
          new Promise<void>((done) => {
            const stream = session.request({
              ':method': 'POST',
              ':path': METHOD,
              'content-type': 'application/grpc',
              te: 'trailers',
            });
            let status = 'none';
            stream.on('response', (headers) => {
              if (headers['grpc-status'] !== undefined) status = String(headers['grpc-status']);
            });
            stream.on('trailers', (trailers) => {
              status = String(trailers['grpc-status']);
            });
            stream.on('data', () => {});
            const finish = (): void => {
              const ms = performance.now() - dueMs;
              byStatus[status] = (byStatus[status] ?? 0) + 1;
              if (status === '0') answered.push(ms);
              else if (status === '8') refused.push(ms);
              done();
            };
            stream.on('close', finish);
            stream.end(request);
          }),
        );
      }
      if (sent >= total) {
        clearInterval(tick);
        Promise.all(calls).then(() => {
          session.close();
          answered.sort((a, b) => a - b);
          refused.sort((a, b) => a - b);
          resolve({
            byStatus,
            answeredP50Ms: quantile(answered, 0.5),
            answeredP99Ms: quantile(answered, 0.99),
            refusedP99Ms: quantile(refused, 0.99),
          });
        });
      }
    }, 5);
  });
}

async function metric(http: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${http}/metrics`)).text();
  const line = text.split('\n').find((entry) => entry.startsWith(`${name}${labels} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

interface Wrk {
  readonly perSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly requests: number;
}

function ms(text: string | undefined): number {
  const match = /([\d.]+)(us|ms|s)/.exec(text ?? '');
  if (match === null) return Number.NaN;
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

async function wrk(http: string, connections: number, seconds: number): Promise<Wrk> {
  const out = await run('wrk', [
    '-t1',
    `-c${connections}`,
    `-d${seconds}s`,
    '--latency',
    '-s',
    luaFile,
    `${http}/v1/limit`,
  ]);
  return {
    perSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]),
    p50Ms: ms(/\s50%\s+(\S+)/.exec(out)?.[1]),
    p99Ms: ms(/\s99%\s+(\S+)/.exec(out)?.[1]),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    requests: Number(/(\d+) requests in/.exec(out)?.[1]),
  };
}

const round = (value: number): string => (Number.isFinite(value) ? value.toFixed(1) : '-');

async function main(): Promise<void> {
  const redis = USE_REDIS ? await startRedis() : undefined;
  const store = redis === undefined ? [] : ['--redis', redis.url];
  console.log(
    `store: ${redis === undefined ? 'memory' : 'redis'}; load average at start ${loadavg()
      .map((v) => v.toFixed(1))
      .join(' ')}`,
  );
  try {
    const base = await serve([...store, '--no-shed']);
    const capacity = await h2load(base.grpc, ['-c', '4', '-m', '50'], SECONDS);
    const httpCapacity = await wrk(base.http, 64, SECONDS);
    await stop(base);
    const offered = Math.ceil((capacity.perSecond * FACTOR) / CONNECTIONS);
    console.log(
      `capacity: gRPC ${Math.round(capacity.perSecond)} calls/s (h2load -c 4 -m 50, p99 ${round(capacity.p99Ms)} ms); HTTP ${Math.round(httpCapacity.perSecond)} req/s (wrk -c 64, p99 ${round(httpCapacity.p99Ms)} ms)`,
    );
    console.log(
      `offered: gRPC ${offered * CONNECTIONS} calls/s (h2load -c ${CONNECTIONS} --rps ${offered} -m 1000, ${SECONDS} s) + a probe at ${PROBE_PER_SECOND}/s; HTTP wrk -c ${64 * FACTOR}`,
    );
    const variants: [string, readonly string[]][] = [
      ['--no-shed', ['--no-shed']],
      [GUARD_ARGS.length === 0 ? 'guard (defaults)' : `guard ${GUARD_ARGS.join(' ')}`, GUARD_ARGS],
    ];
    if (BARE) {
      const running = await bare();
      const [load, probed] = await Promise.all([
        h2load(running.grpc, ['-c', String(CONNECTIONS), '--rps', String(offered), '-m', '1000'], SECONDS),
        probe(running.grpc, SECONDS),
      ]);
      await stop(running);
      console.log(
        `bare node:http2: gRPC ${Math.round(load.perSecond)} calls/s done (${load.done} done, ${load.failed} failed), all calls p50 ${round(load.p50Ms)} / p99 ${round(load.p99Ms)} ms; probe ${JSON.stringify(probed.byStatus)}, answered p50 ${round(probed.answeredP50Ms)} / p99 ${round(probed.answeredP99Ms)} ms; load ${(loadavg()[0] as number).toFixed(1)}`,
      );
    }
    for (const [name, args] of SKIP_OFF ? variants.slice(1) : variants) {
      const running = await serve([...store, ...args]);
      const [load, probed] = await Promise.all([
        h2load(running.grpc, ['-c', String(CONNECTIONS), '--rps', String(offered), '-m', '1000'], SECONDS),
        probe(running.grpc, SECONDS),
      ]);
      const refused = await metric(running.http, 'sluice_service_shed_total', '{protocol="grpc"}');
      const storeErrors = await metric(
        running.http,
        'ratelimit_service_should_rate_limit_error_total',
        '{err_type="redis_error"}',
      );
      // The gRPC run's backlog is still being drained for up to a second after h2load stops (wrk's p99 was
      // 796 ms over its first 3 s, 32 ms after a 3 s pause): HTTP is measured once it is gone.
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const http = await wrk(running.http, 64 * FACTOR, SECONDS);
      const httpRefused = await metric(running.http, 'sluice_service_shed_total', '{protocol="http"}');
      await stop(running);
      console.log(
        `${name}: gRPC ${Math.round(load.perSecond)} calls/s done (${load.done} done, ${load.failed} failed), all calls p50 ${round(load.p50Ms)} / p99 ${round(load.p99Ms)} ms; refused ${refused}; store errors ${storeErrors}; probe ${JSON.stringify(probed.byStatus)}, answered p50 ${round(probed.answeredP50Ms)} / p99 ${round(probed.answeredP99Ms)} ms, refused p99 ${round(probed.refusedP99Ms)} ms`,
      );
      console.log(
        `${name}: HTTP ${Math.round(http.perSecond)} req/s, p50 ${round(http.p50Ms)} / p99 ${round(http.p99Ms)} ms, ${http.non2xx} of ${http.requests} not 2xx, refused ${httpRefused}`,
      );
    }
    console.log(
      `load average at end ${loadavg()
        .map((v) => v.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    await redis?.stop();
  }
}

await main();
