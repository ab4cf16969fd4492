// Runs `sluice serve --envoy` as a child process and talks to it through a real grpc-js client
// built from the service's own .proto files.

import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { Redis } from 'ioredis';
import { type RunningCli, startCli } from '../cli.js';

/** The repository root (build/test/envoy -> ../../..). */
export {
  type Descriptor,
  type DescriptorStatus,
  type Entry,
  EnvoyClient,
  FIXTURES,
  OK,
  OVER_LIMIT,
  PROTO_DIR,
  type RateLimitRequest,
  type RateLimitResponse,
  type Struct,
  structToJson,
  UNIT,
} from './client.js';

import { ROOT } from '../paths.js';
import { clearOfWindowEnd } from '../window.js';
import { EnvoyClient } from './client.js';

export { ROOT };

/** A temporary directory of config files. */
export function configDir(files: Readonly<Record<string, string>>): string {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-envoy-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

/**
 * A directory laid out as Kubernetes mounts a ConfigMap: `name -> ..data/name`, `..data -> ..<version>`;
 * `swap` writes a new version and replaces `..data` by an atomic rename, as the kubelet does.
 */
export function configMapDir(files: Readonly<Record<string, string>>): {
  dir: string;
  swap(files: Readonly<Record<string, string>>): void;
} {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-configmap-'));
  let version = 0;
  const writeVersion = (content: Readonly<Record<string, string>>): string => {
    const name = `..v${++version}`;
    mkdirSync(join(dir, name));
    for (const [file, text] of Object.entries(content)) writeFileSync(join(dir, name, file), text);
    return name;
  };
  const first = writeVersion(files);
  symlinkSync(first, join(dir, '..data'));
  for (const file of Object.keys(files)) symlinkSync(join('..data', file), join(dir, file));
  let current = first;
  return {
    dir,
    swap(content) {
      const next = writeVersion(content);
      symlinkSync(next, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      rmSync(join(dir, current), { recursive: true, force: true });
      current = next;
    },
  };
}

export interface EnvoyServe {
  readonly running: RunningCli;
  readonly client: EnvoyClient;
  readonly http: string;
  readonly grpc: string;
  stop(): Promise<number | null>;
}

/** Starts `sluice serve --envoy <path>` on free ports and connects a client. */
/** Services still running: a test that fails before stopping its own must not keep the file alive. */
const started = new Set<EnvoyServe>();
after(async () => {
  for (const serve of started) await serve.stop();
});

export async function startEnvoyServe(path: string, args: readonly string[] = []): Promise<EnvoyServe> {
  const running = startCli(['serve', '--port', '0', '--grpc-port', '0', '--envoy', path, ...args], {
    cwd: ROOT,
  });
  await running.waitFor(/envoy ShouldRateLimit on grpc:\/\/[\d.]+:\d+/);
  const out = running.output().stdout;
  const http = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1] as string;
  const grpc = /grpc:\/\/([\d.]+:\d+)/.exec(out)?.[1] as string;
  const client = new EnvoyClient(grpc);
  const serve: EnvoyServe = {
    running,
    client,
    http,
    grpc,
    async stop() {
      started.delete(serve);
      client.close();
      running.child.kill('SIGTERM');
      return (await running.exited).code;
    },
  };
  started.add(serve);
  return serve;
}

/** One HTTP exchange. */
export function httpCall(
  url: string,
  method = 'GET',
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method, agent: false }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** A metric's value from GET /metrics, 0 when absent. */
export async function metric(
  http: string,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): Promise<number> {
  const text = (await httpCall(`${http}/metrics`)).body;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`))) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return 0;
}

/** Resolves once `check` returns true, polling; rejects with `what` after `limitMs` (a bound, not a measure). */
export async function eventually(
  what: string,
  check: () => Promise<boolean> | boolean,
  limitMs = 10_000,
): Promise<void> {
  const until = Date.now() + limitMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > until) throw new Error(`${what}: not within ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The fixed windows of Envoy's units, in milliseconds. */
export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;

/** Waits out the last `marginMs` of a minute's window (see clearOfWindowEnd), as Envoy's unit. */
export function awayFromMinuteEnd(marginMs = 10_000): Promise<void> {
  return clearOfWindowEnd(MINUTE_MS, marginMs);
}

/** The scripts a Redis server has run so far: EVALSHA and EVAL calls in INFO commandstats. */
export async function scriptCalls(client: { info(section: string): Promise<string> }): Promise<number> {
  const stats = await client.info('commandstats');
  return [...stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
}

/**
 * For the enclosing suite: `sluice serve --envoy <path>` on the Redis `server()` gives, and an
 * ioredis client of that Redis (to count its scripts, read its keys); both stopped after the suite.
 */
export function envoyOnRedis(
  path: string,
  server: () => { readonly url: string; readonly port: number },
): { serve(): EnvoyServe; redis(): Redis } {
  let serve: EnvoyServe | undefined;
  let client: Redis | undefined;
  before(async () => {
    serve = await startEnvoyServe(path, ['--redis', server().url]);
    client = new Redis({ port: server().port, lazyConnect: true });
    await client.connect();
  });
  after(async () => {
    client?.disconnect();
    await serve?.stop();
  });
  return { serve: () => serve as EnvoyServe, redis: () => client as Redis };
}
