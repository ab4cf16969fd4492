// Runs `sluice serve --envoy` as a child process and talks to it through a real grpc-js client
// built from the service's own .proto files.

import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';
import { credentials, loadPackageDefinition, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { type RunningCli, startCli } from '../helpers/cli.js';

/** The repository root (build/test/envoy -> ../../..). */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const PROTO_DIR = join(ROOT, 'src', 'envoy', 'proto');
export const FIXTURES = join(ROOT, 'test', 'envoy', 'fixtures');

export interface Entry {
  key: string;
  value?: string;
}

export interface Descriptor {
  entries: Entry[];
  limit?: { requests_per_unit: number; unit: number };
  hits_addend?: { value: number };
}

export interface RateLimitRequest {
  domain: string;
  descriptors: Descriptor[];
  hits_addend?: number;
}

export interface DescriptorStatus {
  code: number;
  current_limit: { name: string; requests_per_unit: number; unit: number } | null;
  limit_remaining: number;
  duration_until_reset: { seconds: number; nanos: number } | null;
}

export interface RateLimitResponse {
  overall_code: number;
  statuses: DescriptorStatus[];
  response_headers_to_add: { key: string; value: string }[];
}

export const OK = 1;
export const OVER_LIMIT = 2;
export const UNIT = {
  UNKNOWN: 0,
  SECOND: 1,
  MINUTE: 2,
  HOUR: 3,
  DAY: 4,
  MONTH: 5,
  YEAR: 6,
  WEEK: 7,
} as const;

type Callback<T> = (error: ServiceError | null, value: T) => void;
interface RateLimitClient {
  ShouldRateLimit(
    request: RateLimitRequest,
    options: { deadline: number },
    callback: Callback<RateLimitResponse>,
  ): void;
  close(): void;
}
interface HealthClient {
  Check(
    request: { service: string },
    options: { deadline: number },
    callback: Callback<{ status: number }>,
  ): void;
  close(): void;
}

const definition = loadSync(['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'], {
  includeDirs: [PROTO_DIR],
  keepCase: true,
  longs: Number,
  enums: Number,
  defaults: true,
});
// biome-ignore lint/suspicious/noExplicitAny: the loaded package is untyped by nature.
const loaded = loadPackageDefinition(definition) as any;

/** A client of both services on one address. */
export class EnvoyClient {
  readonly #rateLimit: RateLimitClient;
  readonly #health: HealthClient;

  constructor(address: string) {
    this.#rateLimit = new loaded.envoy.service.ratelimit.v3.RateLimitService(
      address,
      credentials.createInsecure(),
    );
    this.#health = new loaded.grpc.health.v1.Health(address, credentials.createInsecure());
  }

  /** ShouldRateLimit; rejects with the ServiceError (its `code` is the gRPC status). */
  shouldRateLimit(request: RateLimitRequest, timeoutMs = 10_000): Promise<RateLimitResponse> {
    return new Promise((resolve, reject) => {
      this.#rateLimit.ShouldRateLimit(request, { deadline: Date.now() + timeoutMs }, (error, response) =>
        error === null ? resolve(response) : reject(error),
      );
    });
  }

  /** The health status number (1 SERVING, 2 NOT_SERVING); rejects with the ServiceError. */
  health(service = ''): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#health.Check({ service }, { deadline: Date.now() + 10_000 }, (error, response) =>
        error === null ? resolve(response.status) : reject(error),
      );
    });
  }

  close(): void {
    this.#rateLimit.close();
    this.#health.close();
  }
}

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
