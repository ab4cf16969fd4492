// Limiter options: their types, their defaults, and the one path that validates and resolves them.

import { type BudgetConfig, type BudgetOptions, resolveBudget } from './budget/options.js';
import type { FailureMode } from './core/health.js';
import { invalidOption } from './errors.js';
import type { DecisionHook, ErrorHook, MetricsRecorder } from './hooks.js';
import type { Policy, Store } from './types.js';
import { keyPart, knownKeys, optionsObject, positiveInteger } from './validate.js';

/** The defaults of the options that have one. */
export const LIMITER_DEFAULTS = {
  onStoreError: 'allow',
  timeoutMs: 50,
  denyCacheMaxEntries: 10_000,
  enforce: true,
  overrides: false,
} as const;

/** The longest `timeoutMs` accepted: what a Node.js timer can wait. */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** Options of {@link createLimiter}. */
export interface LimiterOptions {
  /** Where state lives: a `RedisStore` or a `MemoryStore`. */
  readonly store: Store;
  /** The algorithm and its parameters, e.g. `tokenBucket({ capacity: 100, refillPerSecond: 10 })`. */
  readonly policy: Policy;
  /** Part of every key, so several limiters can share one store. Printable ASCII, no braces. */
  readonly name: string;
  /**
   * Milliseconds since the epoch. By default the store's clock decides: Redis's `TIME` inside the
   * script, so application servers that disagree about the time cannot disagree about limits.
   * Give a clock to replay timelines in tests.
   */
  readonly clock?: () => number;
  /**
   * What to decide when the store fails or does not answer within `timeoutMs`: `'allow'` fails
   * open, `'deny'` fails closed, `'fallback'` decides with an in-process MemoryStore of the same
   * policy until the store answers again (each process then enforces the whole limit on its own
   * share of traffic). Such decisions carry `reason`.
   *
   * Open by default, which suits ordinary API traffic: a limiter exists to protect
   * a service, and one that turns a Redis outage into an outage of every endpoint does the opposite.
   * Choose `'deny'` where abuse costs more than downtime (logins, payments, expensive calls), and
   * `'fallback'` to keep a per-process limit through an outage.
   * @default 'allow'
   */
  readonly onStoreError?: FailureMode;
  /**
   * The longest a call waits for the store, in ms; then the `onStoreError` mode decides. Loopback and
   * in-datacenter Redis answer in well under a millisecond, a coalesced batch under load in a few; 50
   * leaves room for a garbage-collection pause while adding little to a request that Redis cannot serve.
   * @default 50
   */
  readonly timeoutMs?: number;
  /**
   * Called with every decision and its context, for metrics and logs. In shadow mode it sees the
   * real verdict. What it throws is reported once as a process warning and never reaches the caller.
   */
  readonly onDecision?: DecisionHook;
  /** Called with each store failure or timeout (a `SluiceError`; the client's error is its `cause`). */
  readonly onError?: ErrorHook;
  /**
   * Where to count decisions: `prometheusMetrics()` or `openTelemetryMetrics()` from `sluice/metrics`
   * (one recorder serves many limiters, each labelled by its `name`).
   * @default undefined (no metrics)
   */
  readonly metrics?: MetricsRecorder;
  /**
   * Remembers the store's denials in this process, so an identifier denied for `retryAfterMs` is
   * denied again without a round trip until then (`reason: 'cached'`). `true` keeps up to 10 000
   * identifiers (least recently used first out); `{ maxEntries }` sets the bound.
   * @default false
   */
  readonly denyCache?: boolean | { readonly maxEntries?: number };
  /**
   * `false` runs in shadow mode: every decision is made and reported to `onDecision`, but callers
   * always get `allowed: true`, with the real verdict in `wouldAllow`. For rolling out limits safely.
   * @default true
   */
  readonly enforce?: boolean;
  /**
   * One limit shared by several regions, each with its own store (`store`): the policy states the
   * global limit, and every decision is made against this region's store alone, on what the ledger
   * in `budget.global` granted it, asked for in the background (see docs/regions.md). The limiter
   * then has `budget()` and `close()`.
   * @default undefined (the policy's limit is this store's alone)
   */
  readonly budget?: BudgetOptions;
  /**
   * Reads what operators store for identifiers, in the decision's own script (no extra round trip):
   * a limit (`setLimit`), used instead of the policy's own unless the call gives its `limit`, and a
   * denial (`deny`), which refuses with `reason: 'denied'`. Every process sees a change at its next
   * decision. Costs each decision a look at two more keys in the store (see docs/per-call-limits.md).
   * @default false
   */
  readonly overrides?: boolean;
}

/** The resolved, validated configuration the limiter runs on. */
export interface ResolvedLimiterOptions {
  readonly store: Store;
  readonly policy: Policy;
  readonly name: string;
  readonly clock: (() => number) | undefined;
  readonly onStoreError: FailureMode;
  readonly timeoutMs: number;
  readonly onDecision: DecisionHook | undefined;
  readonly onError: ErrorHook | undefined;
  readonly metrics: MetricsRecorder | undefined;
  /** 0 when the deny cache is off. */
  readonly denyCacheMaxEntries: number;
  readonly enforce: boolean;
  /** A budget shared with other regions; undefined for a limiter of its own. */
  readonly budget: BudgetConfig | undefined;
  readonly overrides: boolean;
}

const KNOWN = [
  'store',
  'policy',
  'name',
  'clock',
  'onStoreError',
  'timeoutMs',
  'onDecision',
  'onError',
  'metrics',
  'denyCache',
  'enforce',
  'budget',
  'overrides',
] as const;
const FAILURE_MODES: readonly unknown[] = ['allow', 'deny', 'fallback'] satisfies FailureMode[];

function isStore(value: unknown): value is Store {
  const store = value as Partial<Store> | null;
  return (
    typeof store === 'object' &&
    store !== null &&
    typeof store.decide === 'function' &&
    typeof store.reset === 'function' &&
    typeof store.keyFor === 'function'
  );
}

function isPolicy(value: unknown): value is Policy {
  const policy = value as Partial<Policy> | null;
  return (
    typeof policy === 'object' &&
    policy !== null &&
    typeof policy.decide === 'function' &&
    typeof policy.rule === 'object' &&
    policy.rule !== null
  );
}

/** Validates limiter options and applies defaults; throws a SluiceError naming the first bad option. */
export function resolveLimiterOptions(options: LimiterOptions): ResolvedLimiterOptions {
  const raw = optionsObject('createLimiter options', options, true);
  knownKeys('createLimiter', raw, KNOWN);
  if (!isStore(raw.store)) throw invalidOption('store', 'a RedisStore or MemoryStore', raw.store);
  if (!isPolicy(raw.policy)) {
    throw invalidOption('policy', 'a policy such as tokenBucket({ capacity, refillPerSecond })', raw.policy);
  }
  const name = keyPart('name', raw.name);
  if (raw.policy.leaseMs !== undefined && raw.denyCache !== undefined && raw.denyCache !== false) {
    // A remembered denial would outlast the release that ends it, which this process may not see.
    throw invalidOption(
      'denyCache',
      `false for ${raw.policy.description} (a denial for lack of slots ends when any holder releases, in any process)`,
      raw.denyCache,
    );
  }
  if (raw.clock !== undefined && typeof raw.clock !== 'function') {
    throw invalidOption('clock', 'a function returning milliseconds', raw.clock);
  }
  if (raw.onStoreError !== undefined && !FAILURE_MODES.includes(raw.onStoreError)) {
    throw invalidOption('onStoreError', "'allow', 'deny' or 'fallback'", raw.onStoreError);
  }
  const overrides = flag('overrides', raw.overrides, LIMITER_DEFAULTS.overrides);
  if (overrides && raw.store.stored === undefined) {
    throw invalidOption(
      'overrides',
      `false for a ${raw.store.kind} store, which keeps nothing per identifier (use a RedisStore or MemoryStore)`,
      raw.overrides,
    );
  }
  if (overrides && raw.budget !== undefined) {
    // A region holds what the ledger granted for the policy's limit: a stored limit would change it
    // in one region and not in the ledger.
    throw invalidOption('overrides', 'false for a limiter with a `budget`', raw.overrides);
  }
  return Object.freeze({
    store: raw.store,
    policy: raw.policy,
    name,
    clock: raw.clock as (() => number) | undefined,
    onStoreError: (raw.onStoreError as FailureMode | undefined) ?? LIMITER_DEFAULTS.onStoreError,
    timeoutMs:
      raw.timeoutMs === undefined
        ? LIMITER_DEFAULTS.timeoutMs
        : positiveInteger('timeoutMs', raw.timeoutMs, MAX_TIMEOUT_MS),
    onDecision: hook('onDecision', raw.onDecision) as DecisionHook | undefined,
    onError: hook('onError', raw.onError) as ErrorHook | undefined,
    metrics: resolveRecorder('metrics', raw.metrics),
    denyCacheMaxEntries: denyCacheEntries(raw.denyCache),
    enforce: flag('enforce', raw.enforce, LIMITER_DEFAULTS.enforce),
    budget: raw.budget === undefined ? undefined : resolveBudget(raw.budget, raw.policy),
    overrides,
  });
}

function hook(option: string, value: unknown): unknown {
  if (value !== undefined && typeof value !== 'function') {
    throw invalidOption(option, 'a function', value);
  }
  return value;
}

/** A metrics recorder option, checked; `option` names it in the message. */
export function resolveRecorder(option: string, value: unknown): MetricsRecorder | undefined {
  if (value === undefined) return undefined;
  const candidate = value as Partial<MetricsRecorder> | null;
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.register !== 'function' ||
    typeof candidate.record !== 'function' ||
    typeof candidate.health !== 'function'
  ) {
    throw invalidOption(
      option,
      "a recorder from 'sluice/metrics' (prometheusMetrics(), openTelemetryMetrics())",
      value,
    );
  }
  return candidate as MetricsRecorder;
}

function flag(option: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw invalidOption(option, 'true or false', value);
  return value;
}

function denyCacheEntries(value: unknown): number {
  if (value === undefined || value === false) return 0;
  if (value === true) return LIMITER_DEFAULTS.denyCacheMaxEntries;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidOption('denyCache', 'true, false or { maxEntries }', value);
  }
  const raw = value as Record<string, unknown>;
  knownKeys('denyCache', raw, ['maxEntries']);
  return raw.maxEntries === undefined
    ? LIMITER_DEFAULTS.denyCacheMaxEntries
    : positiveInteger('denyCache.maxEntries', raw.maxEntries, 10_000_000);
}
