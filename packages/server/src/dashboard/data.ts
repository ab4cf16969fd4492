// The document behind the dashboard (GET /dashboard/data): per policy, its chart, health, percentiles and hot identifiers.
import type { BudgetView } from 'sluice';
import type { DecisionMetrics, HeavyHitter } from 'sluice/metrics';
import type { GuardView } from './guard-history.js';
import { HISTORY_SECONDS, type LimiterSeries } from './history.js';

/** What the service knows of a policy beyond its counts. */
export interface PolicyInfo {
  readonly description: string;
  /** The most granted at once (a concurrency policy's slots). */
  readonly limit: number;
  readonly onStoreError: 'allow' | 'deny' | 'fallback';
  readonly timeoutMs: number;
}

/** The parts of the document that do not change while the service runs. */
export interface ServiceInfo {
  /** Where decisions are kept, as the start banner says it (passwords masked). */
  readonly store: string;
  readonly startedAtMs: number;
  readonly policies: ReadonlyMap<string, PolicyInfo>;
  /** The config file read (`null` for the built-in one) and its content as loaded. */
  readonly configPath: string | null;
  readonly config: unknown;
}

/** One policy on the dashboard. */
export interface PolicyView extends PolicyInfo, LimiterSeries {
  readonly name: string;
  readonly enforced: boolean;
  readonly storeUp: boolean;
  readonly downShards: readonly string[];
  readonly downSinceMs: number | null;
  readonly totals: {
    readonly allowed: number;
    readonly denied: number;
    readonly shadowDenied: number;
    readonly units: number;
    readonly nearLimit: number;
    readonly denyCacheHits: number;
    readonly storeSkipped: Readonly<Record<string, number>>;
  };
  readonly topDenied: readonly HeavyHitter[];
  /** A concurrency policy's slots in use now and those of leases that lapsed unreleased; null for the others. */
  readonly leases: { readonly slotsInUse: number; readonly expiredUnreleased: number } | null;
  /** What this region holds and asks of a global budget, for a policy that shares one (`serve --region`). */
  readonly budget: BudgetView | null;
}

/** The whole document. */
export interface DashboardData {
  readonly nowMs: number;
  readonly startedAtMs: number;
  /** When the chart's first interval starts; each lasts a second, the last one is unfinished. */
  readonly seriesStartMs: number;
  readonly historySeconds: number;
  readonly store: string;
  readonly policies: readonly PolicyView[];
  readonly configPath: string | null;
  readonly config: unknown;
  /** The overload guard: its limit and refusals now and over the chart's intervals; null when it is off. */
  readonly guard: GuardView | null;
}

/** Puts the counts, the history and the service's settings together, in the config's policy order. */
export function dashboardData(
  metrics: DecisionMetrics,
  series: ReadonlyMap<string, LimiterSeries>,
  seriesStartMs: number,
  info: ServiceInfo,
  nowMs: number,
  guard: GuardView | null = null,
): DashboardData {
  const counts = new Map(metrics.snapshot().map((limiter) => [limiter.limiter, limiter]));
  const empty: LimiterSeries = {
    allowed: [],
    denied: [],
    shadowDenied: [],
    p50Ms: null,
    p99Ms: null,
    p50BucketMs: null,
    p99BucketMs: null,
    latencyCount: 0,
  };
  const policies = [...info.policies].map(([name, policy]): PolicyView => {
    const limiter = counts.get(name);
    return {
      name,
      ...policy,
      ...(series.get(name) ?? empty),
      enforced: limiter?.enforced ?? true,
      storeUp: limiter?.storeUp ?? true,
      downShards: limiter?.downShards ?? [],
      downSinceMs: limiter?.downSinceMs ?? null,
      totals: {
        allowed: limiter?.decisions.allowed ?? 0,
        denied: limiter?.decisions.denied ?? 0,
        shadowDenied: limiter?.decisions.shadow_denied ?? 0,
        units: limiter?.units ?? 0,
        nearLimit: limiter?.nearLimit ?? 0,
        denyCacheHits: limiter?.denyCacheHits ?? 0,
        storeSkipped: limiter?.storeSkipped ?? {},
      },
      topDenied: limiter?.topDenied ?? [],
      leases: limiter?.leases ?? null,
      budget: limiter?.budget ?? null,
    };
  });
  return {
    nowMs,
    startedAtMs: info.startedAtMs,
    seriesStartMs,
    historySeconds: HISTORY_SECONDS,
    store: info.store,
    policies,
    configPath: info.configPath,
    config: info.config,
    guard,
  };
}
