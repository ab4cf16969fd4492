// What refusing a gRPC call costs the server, beside answering it: bare node:http2 servers (no sluice) that answer a
// constant ShouldRateLimit frame, refuse trailers-only RESOURCE_EXHAUSTED (what `sluice serve` sends), or reset the
// stream REFUSED_STREAM, each under h2load (nghttp2-client, 4 connections x 50 streams), in alternating rounds. The
// server's CPU time per call is the figure to compare on a shared machine: its calls/s follow the machine's load.
//
//   node build/bench/refusal-cost.js [--calls 20000] [--rounds 3]
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MODES = ['answer', 'trailers-only', 'rst-refused-stream'] as const;
type Mode = (typeof MODES)[number];
const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** The server side: one mode, its port on stdout. */
function serve(mode: Mode): void {
  // OverLimit answer { overall_code: OK } framed, and the refusal's headers as `sluice serve` sends them.
  const answer = Buffer.from([0, 0, 0, 0, 2, 8, 1]);
  const headers = { ':status': 200, 'content-type': 'application/grpc' };
  const refused = {
    ...headers,
    'grpc-status': '8',
    'grpc-message': 'the%20rate%20limit%20service%20is%20overloaded',
    'grpc-retry-pushback-ms': '1000',
  };
  const ignore = (): void => {};
  const server = http2.createServer({ settings: { maxConcurrentStreams: 100 } });
  server.on('stream', (stream) => {
    if (mode === 'answer') {
      stream.on('data', ignore);
      stream.on('end', () => {
        stream.respond(headers, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(answer);
      });
    } else if (mode === 'trailers-only') {
      stream.respond(refused, { endStream: true });
      stream.resume();
    } else {
      // node turns the reset into an error on the stream; without a listener it would be thrown.
      stream.on('error', ignore);
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    }
  });
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    console.log(typeof address === 'object' && address !== null ? address.port : 0);
  });
}

/** User + system CPU seconds of a process, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function start(mode: Mode): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--serve', mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout?.once('data', (chunk: Buffer) => resolve({ child, port: Number(String(chunk).trim()) }));
    child.once('exit', (code) => reject(new Error(`the ${mode} server exited with ${code}`)));
  });
}

function h2load(port: number, calls: number, requestFile: string): Promise<string> {
  const args = ['-n', String(calls), '-c', '4', '-m', '50', '-t', '1', '-d', requestFile];
  args.push('-H', 'content-type: application/grpc', '-H', 'te: trailers', `http://127.0.0.1:${port}${PATH}`);
  return new Promise((resolve, reject) => {
    execFile('h2load', args, { timeout: 300_000 }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
  });
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const flag = (name: string, fallback: number): number => {
    const at = argv.indexOf(`--${name}`);
    return at === -1 ? fallback : Number(argv[at + 1]);
  };
  const calls = flag('calls', 20_000);
  const rounds = flag('rounds', 3);
  const dir = mkdtempSync(join(tmpdir(), 'sluice-refusal-'));
  // RateLimitRequest { domain: "bench", descriptors: [{ entries: [{ key: "user", value: "abcdefgh" }] }] }, framed.
  const message = Buffer.from('0a0562656e636812120a100a047573657212086162636465666768', 'hex');
  const prefix = Buffer.from([0, 0, 0, 0, message.length]);
  const requestFile = join(dir, 'request.bin');
  writeFileSync(requestFile, Buffer.concat([prefix, message]));
  console.log(`${calls} calls per run, h2load -c 4 -m 50; node ${process.version}`);
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const mode of MODES) {
        const { child, port } = await start(mode);
        const pid = child.pid as number;
        const before = cpuSeconds(pid);
        const out = await h2load(port, calls, requestFile);
        const cpuUsPerCall = ((cpuSeconds(pid) - before) * 1e6) / calls;
        child.kill('SIGTERM');
        // h2load counts a reset stream as failed (0 req/s): the rate is taken from the run's time.
        const [, time, unit] = /finished in ([\d.]+)(ms|s),/.exec(out) ?? [];
        const perSecond = calls / (Number(time) / (unit === 'ms' ? 1000 : 1));
        const done = /(\d+) done/.exec(out)?.[1];
        console.log(
          `round ${round} ${mode}: server CPU ${cpuUsPerCall.toFixed(1)} us/call, ${Math.round(perSecond)} calls/s (h2load: ${done} done); load ${(loadavg()[0] as number).toFixed(1)}`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--serve') serve(process.argv[3] as Mode);
else await main();
