// Starts the Envoy rate limit service beside `sluice serve`: config, gRPC server, HTTP twins, hot reload.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import type { BudgetOptions, MetricsRecorder, Store } from 'sluice';
import type { ServiceGuard } from '../service/guard.js';
import type { EnvoyBounds } from './bounds.js';
import { buildConfig } from './config.js';
import { startGrpc } from './grpc.js';
import { envoyRoutes } from './http.js';
import { type EnvoyMetrics, envoyMetrics } from './metrics.js';
import { readConfigFiles, watchConfig } from './reload.js';
import { EnvoyService } from './service.js';

export { BOUND_MAXIMUMS, DEFAULT_BOUNDS, type EnvoyBounds } from './bounds.js';
export { EnvoyConfigError } from './yaml-reader.js';

/** The default address of the gRPC server, as the reference's: loopback, port 8081. */
export const GRPC_DEFAULTS = { host: '127.0.0.1', port: 8081 } as const;

/** How long a store health probe's answer is reused: health checks come often, from many proxies. */
const PROBE_REUSE_MS = 250;

/** Options of {@link startEnvoy}. */
export interface EnvoyOptions {
  /** A config file, or a directory of them (every .yaml and .yml in it). */
  readonly path: string;
  readonly store: Store;
  /**
   * A budget the rules share with other regions (`serve --region`): every rule's limit but sliding
   * logs' and descriptors' overrides, which stay this region's own.
   */
  readonly budget?: BudgetOptions | undefined;
  /**
   * The recorder the service's /metrics reads (`sluice serve`'s): each rule that shares `budget`
   * reports to it, its region's budget (`sluice_budget_*{limiter,region}`) and its decisions.
   */
  readonly recorder?: MetricsRecorder | undefined;
  /** Whether the store is one shard (memory, one Redis, Sentinel) rather than a Redis Cluster. */
  readonly oneShard: boolean;
  readonly host: string;
  readonly port: number;
  /** Answer OK whatever the limits say (the reference's global shadow mode). */
  readonly shadow: boolean;
  /** Every descriptor in quota mode (the reference's global quota mode). */
  readonly quotaMode: boolean;
  /** Put the IETF RateLimit fields, an item per descriptor with a limit, in the response headers. */
  readonly headers: boolean;
  /** Return the request and the passing descriptors' `metadata` as the response's dynamic metadata. */
  readonly metadata: boolean;
  /** The most work one call may ask: message size, descriptors, entries per descriptor. */
  readonly bounds: EnvoyBounds;
  /** Admits ShouldRateLimit calls when the service has room; none takes every call. */
  readonly guard: ServiceGuard | undefined;
  /** Where the Envoy metrics are registered; none without one. */
  readonly registry: Registry | undefined;
  /** Resolves when the store answers, rejects when it does not (absent: the memory store). */
  readonly probe: (() => Promise<unknown>) | undefined;
  /** One line for the log. */
  readonly log: (line: string) => void;
  /** How often the files are read again, besides file system events. @default 500 */
  readonly reloadIntervalMs?: number;
}

/** The running service. */
export interface RunningEnvoy {
  /** The gRPC port (the one picked, when 0 was asked). */
  readonly port: number;
  readonly files: readonly string[];
  readonly domains: readonly string[];
  /** Serves POST /json and GET /healthcheck; false for other paths. */
  readonly http: (request: IncomingMessage, response: ServerResponse) => boolean;
  /** Reports NOT_SERVING, stops reloading, lets calls in flight finish (up to `graceMs`), then stops. */
  close(graceMs: number): Promise<void>;
}

/**
 * Whether the service can answer: a config is loaded, it is not stopping, and the store answers
 * its probe (one probe at a time, its answer reused for PROBE_REUSE_MS).
 */
function healthCheck(
  service: EnvoyService,
  probe: EnvoyOptions['probe'],
  stopping: () => boolean,
): () => Promise<boolean> {
  let probedAt = Number.NEGATIVE_INFINITY;
  let probedOk = false;
  let probing: Promise<boolean> | undefined;
  return async () => {
    if (stopping() || !service.loaded) return false;
    if (probe === undefined) return true;
    if (performance.now() - probedAt < PROBE_REUSE_MS) return probedOk;
    probing ??= probe()
      .then(
        () => true,
        () => false,
      )
      .then((ok) => {
        probedOk = ok;
        probedAt = performance.now();
        probing = undefined;
        return ok;
      });
    return probing;
  };
}

/** Watches the files: a good change is put in force, a bad one logged and counted; returns the stop. */
function reloadOnChange(
  options: EnvoyOptions,
  fingerprint: string,
  service: EnvoyService,
  metrics: EnvoyMetrics | undefined,
): () => void {
  const refused = (error: unknown): void => {
    metrics?.configLoaded(false);
    options.log(
      `config not reloaded, the previous one stays in force: ${error instanceof Error ? error.message : String(error)}`,
    );
  };
  return watchConfig({
    path: options.path,
    fingerprint,
    ...(options.reloadIntervalMs === undefined ? {} : { intervalMs: options.reloadIntervalMs }),
    onChange: (changed) => {
      try {
        const next = buildConfig(changed.sources);
        service.load(next);
        metrics?.configLoaded(true);
        options.log(
          `config reloaded: ${[...next.domains.keys()].join(', ')} from ${next.files.length} file(s)`,
        );
      } catch (error) {
        refused(error);
      }
    },
    onUnreadable: refused,
  });
}

/**
 * Loads the config (a bad file throws EnvoyConfigError naming the file, line and reason) and starts
 * the gRPC server; from then on the files are watched, and a bad change keeps the config in force.
 */
export async function startEnvoy(options: EnvoyOptions): Promise<RunningEnvoy> {
  const { log } = options;
  const files = readConfigFiles(options.path);
  const config = buildConfig(files.sources);
  const metrics: EnvoyMetrics | undefined =
    options.registry === undefined ? undefined : await envoyMetrics(options.registry);
  const service = new EnvoyService({
    store: options.store,
    budget: options.budget,
    recorder: options.recorder,
    oneShard: options.oneShard,
    shadow: options.shadow,
    quotaMode: options.quotaMode,
    headers: options.headers,
    metadata: options.metadata,
    bounds: options.bounds,
    metrics,
    log: (line) => log(line),
  });
  service.load(config);
  metrics?.configLoaded(true);

  let stopping = false;
  const healthy = healthCheck(service, options.probe, () => stopping);
  const onError = (error: unknown): void =>
    log(`unexpected error: ${error instanceof Error ? error.message : String(error)}`);
  const { bounds } = options;
  const grpc = await startGrpc(
    { service, bounds, healthy, metrics, guard: options.guard, onError },
    options.host,
    options.port,
  );
  const stopWatching = reloadOnChange(options, files.fingerprint, service, metrics);
  return {
    port: grpc.port,
    files: config.files,
    domains: [...config.domains.keys()],
    http: envoyRoutes({ service, bounds, healthy, metrics, onError }),
    close: async (graceMs) => {
      stopping = true;
      stopWatching();
      await grpc.close(graceMs);
      service.close();
    },
  };
}
