// What `sluice serve` watches itself with: the metrics recorder, its history, and the admin routes.
import type { Registry } from 'prom-client';
import { LIMITER_DEFAULTS } from 'sluice';
import {
  type DecisionMetrics,
  decisionMetrics,
  prometheusMetrics,
  STORE_SECONDS_BUCKETS,
} from 'sluice/metrics';
import type { Config } from '../cli/config.js';
import type { ServiceGuard } from '../service/guard.js';
import { registerGuardMetrics } from '../service/guard-metrics.js';
import { AdminAccess } from './access.js';
import { dashboardData, type PolicyInfo } from './data.js';
import { GuardHistory } from './guard-history.js';
import { DecisionHistory } from './history.js';
import { type AdminRoutes, adminRoutes, type MetricsSource } from './routes.js';

export interface MonitorOptions {
  readonly config: Config;
  /** Where decisions are kept, as the banner says it (passwords masked). */
  readonly store: string;
  /** The admin token, already checked; `undefined` for none. */
  readonly token: string | undefined;
  /** The overload guard, shown on the dashboard and in /metrics; none with `--no-shed`. */
  readonly guard: ServiceGuard | undefined;
}

export interface Monitor {
  /** The recorder every limiter of the service reports to (`createLimiter({ metrics })`). */
  readonly metrics: DecisionMetrics;
  /** The registry /metrics serves, for other parts of the service to add to; absent without prom-client. */
  readonly registry: Registry | undefined;
  readonly routes: AdminRoutes;
  /** The server is bound: opens the admin routes as the address allows; returns the banner's lines. */
  listening(address: string, base: string): { lines: string[]; dashboard: string | null };
  close(): void;
}

const NO_PROM_CLIENT =
  'This service serves /metrics through prom-client, which is not installed: npm install prom-client';

/** prom-client's default gauges whose names end in `_total`: sums of the per-type gauges it also exports. */
const SUM_GAUGES = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

async function loadRegistry(): Promise<Registry | undefined> {
  try {
    const promClient = await import('prom-client');
    const registry = new promClient.Registry();
    // The process's own CPU, memory and event loop lag, as every Node.js service exports them.
    promClient.collectDefaultMetrics({ register: registry });
    // Less three gauges named like counters, which Prometheus's lint refuses: each is the sum of the per-type gauge
    // beside it (nodejs_active_handles{type} and so on), so `sum(nodejs_active_handles)` still reads it.
    for (const name of SUM_GAUGES) registry.removeSingleMetric(name);
    return registry;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') return undefined;
    throw error;
  }
}

function policyInfo(config: Config): Map<string, PolicyInfo> {
  return new Map(
    [...config.policies].map(([name, policy]) => {
      const failure = config.failure.get(name);
      return [
        name,
        {
          description: policy.description,
          limit: policy.limit,
          onStoreError: failure?.onStoreError ?? LIMITER_DEFAULTS.onStoreError,
          timeoutMs: failure?.timeoutMs ?? LIMITER_DEFAULTS.timeoutMs,
        },
      ];
    }),
  );
}

/** The config as loaded, for the dashboard: policies as their descriptions, with their failure settings. */
function configView(config: Config, policies: ReadonlyMap<string, PolicyInfo>): unknown {
  return {
    prefix: config.prefix,
    policies: Object.fromEntries(policies),
    serve: config.serve,
  };
}

/** Makes the recorder (Prometheus when prom-client is installed), the history and the admin routes. */
export async function startMonitor(options: MonitorOptions): Promise<Monitor> {
  const registry = await loadRegistry();
  const metrics = registry === undefined ? decisionMetrics() : prometheusMetrics({ registry });
  const history = new DecisionHistory(metrics, STORE_SECONDS_BUCKETS);
  const guard = options.guard === undefined ? undefined : new GuardHistory(options.guard);
  if (options.guard !== undefined && registry !== undefined)
    await registerGuardMetrics(options.guard, registry);
  const access = new AdminAccess(options.token);
  const policies = policyInfo(options.config);
  const info = {
    store: options.store,
    startedAtMs: Date.now(),
    policies,
    configPath: options.config.path ?? null,
    config: configView(options.config, policies),
  };
  const source: MetricsSource =
    registry === undefined
      ? { unavailable: NO_PROM_CLIENT }
      : { metrics: () => registry.metrics(), contentType: registry.contentType };
  const routes = adminRoutes({
    access,
    data: () =>
      dashboardData(metrics, history.series(), history.startMs, info, Date.now(), guard?.view() ?? null),
    metrics: source,
  });
  return {
    metrics,
    registry,
    routes,
    listening(address, base) {
      access.listening(address);
      const lines: string[] = [];
      let dashboard: string | null = null;
      if (access.off) {
        lines.push(
          `  dashboard and /metrics: off, since this service listens beyond loopback (${address}) and no admin token is set; set SLUICE_ADMIN_TOKEN (or --admin-token) to turn them on`,
        );
      } else {
        dashboard = `${base}/`;
        lines.push(
          `  dashboard ${base}/   metrics ${base}/metrics${access.hasToken ? '   (admin token required)' : ''}`,
        );
      }
      if (registry === undefined) lines.push(`  ${NO_PROM_CLIENT}`);
      return { lines, dashboard };
    },
    close: () => {
      history.close();
      guard?.close();
    },
  };
}
