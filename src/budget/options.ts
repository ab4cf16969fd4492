// The `budget` option of createLimiter: its type, its defaults, and the one path that validates it against the policy.
import { ERROR_CODES, invalidOption, SluiceError } from '../errors.js';
import type { Policy, Store } from '../types.js';
import { durationMs, keyPart, knownKeys, optionsObject, positiveInteger } from '../validate.js';

/** The defaults of the budget's options that have one. */
export const BUDGET_DEFAULTS = {
  leaseMs: 10_000,
  floor: 0.1,
  reserve: 0.2,
  maxIdentifiers: 100_000,
  ledgerTimeoutMs: 2000,
} as const;

/**
 * One limit shared by several regions, each deciding against its own store: a region admits what
 * the ledger in the global store granted it, and asks for more in the background, never on a
 * request's path (see docs/regions.md).
 */
export interface BudgetOptions {
  /**
   * The store every region reaches, where the ledger lives: a RedisStore (a MemoryStore serves
   * regions made in one process, for tests and examples). Reached in the background only.
   */
  readonly global: Store;
  /** This region's name, one of `regions`. */
  readonly region: string;
  /** Every region sharing the budget, the same list in each (the ledger numbers them by place). */
  readonly regions: readonly string[];
  /**
   * How long a token bucket's (or GCRA's) lease of capacity is held before it returns to the others,
   * in ms: what a region that dies or is cut off keeps from them at most, and how fast capacity
   * follows demand. Leases are renewed every third of it. A window's grants return when it ends.
   * @default 10000
   */
  readonly leaseMs?: number;
  /**
   * The part of the limit all regions together hold without asking, split evenly: what a region
   * admits for an identifier it has never asked for, and keeps when cut off from the global store.
   * At most 1 (0.5 for a sliding window, whose previous window counts too).
   * @default 0.1
   */
  readonly floor?: number;
  /**
   * The part of a window's limit (beyond the floors) kept out of the shares claimed ahead, for the
   * chunks regions ask when they run low. Token bucket leases follow demand without it.
   * @default 0.2
   */
  readonly reserve?: number;
  /**
   * The most identifiers this process keeps track of at once (each a small record); beyond it, new
   * identifiers get the floor until idle ones are dropped.
   * @default 100000
   */
  readonly maxIdentifiers?: number;
  /**
   * How long the background worker waits for the global store before it counts a ledger call as
   * failed (and reports it to `onError`). A reply that comes later is still used.
   * @default 2000
   */
  readonly ledgerTimeoutMs?: number;
}

/** How a policy's budget is kept: per window (fixed or sliding), or as leases of a bucket's rate and capacity. */
export type BudgetKind = 'fixed' | 'sliding' | 'bucket';

/** The resolved budget: validated, with the policy's terms the ledger and the region scripts need. */
export interface BudgetConfig {
  readonly global: Store;
  readonly region: string;
  readonly regionIndex: number;
  readonly regions: readonly string[];
  readonly kind: BudgetKind;
  readonly leaseMs: number;
  /** Units (windows) or capacity (bucket) each region holds without asking. */
  readonly floorUnits: number;
  readonly reservePermille: number;
  readonly maxIdentifiers: number;
  readonly ledgerTimeoutMs: number;
  /** The window (windows) in ms. */
  readonly windowMs: number;
  /** The window's limit, or the bucket's capacity. */
  readonly limit: number;
  /** The bucket's time to fill, in ms (its tolerance); 0 for windows. */
  readonly tauMs: number;
}

const KINDS: Readonly<Record<string, BudgetKind>> = {
  'fixed-window': 'fixed',
  'sliding-window': 'sliding',
  gcra: 'bucket',
};

function fraction(option: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > max) {
    throw invalidOption(option, `a number from 0 to ${max}`, value);
  }
  return value;
}

function regionList(value: unknown): readonly string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 64) {
    throw invalidOption('budget.regions', 'an array of 1 to 64 region names', value);
  }
  const names = value.map((name, i) => keyPart(`budget.regions[${i}]`, name));
  if (new Set(names).size !== names.length) {
    throw new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected \`budget.regions\` to name each region once, got ${JSON.stringify(names)}.`,
    );
  }
  return Object.freeze(names);
}

/** The budget's kind for a policy, or the error: fixed and sliding windows, token buckets and GCRA take one. */
function kindOf(policy: Policy): BudgetKind {
  const kind = KINDS[policy.rule.name];
  if (kind === undefined || policy.description.includes('share=')) {
    throw new SluiceError(
      ERROR_CODES.INVALID_OPTION,
      `Expected a policy whose limit can be shared by a \`budget\` (fixedWindow, slidingWindow, tokenBucket or gcra, without \`share\`), got ${policy.description}.`,
    );
  }
  return kind;
}

/** Validates the `budget` option against the limiter's policy and applies defaults. */
export function resolveBudget(value: unknown, policy: Policy): BudgetConfig {
  const raw = optionsObject('budget', value, true);
  knownKeys('budget', raw, [
    'global',
    'region',
    'regions',
    'leaseMs',
    'floor',
    'reserve',
    'maxIdentifiers',
    'ledgerTimeoutMs',
  ]);
  const global = raw.global as Store | undefined;
  if (typeof global !== 'object' || global === null || typeof global.decide !== 'function') {
    throw invalidOption('budget.global', 'a RedisStore (or a MemoryStore) every region reaches', global);
  }
  const regions = regionList(raw.regions);
  const region = keyPart('budget.region', raw.region);
  const regionIndex = regions.indexOf(region);
  if (regionIndex < 0) {
    throw invalidOption('budget.region', `one of \`budget.regions\` (${regions.join(', ')})`, raw.region);
  }
  const kind = kindOf(policy);
  const floor = fraction('budget.floor', raw.floor, BUDGET_DEFAULTS.floor, kind === 'sliding' ? 0.5 : 1);
  const limit = policy.limit;
  const tauMs = kind === 'bucket' ? policy.rule.parameters[1] : 0;
  return Object.freeze({
    global,
    region,
    regionIndex,
    regions,
    kind,
    leaseMs: raw.leaseMs === undefined ? BUDGET_DEFAULTS.leaseMs : durationMs('budget.leaseMs', raw.leaseMs),
    floorUnits: Math.floor((limit * floor) / regions.length),
    reservePermille: Math.round(1000 * fraction('budget.reserve', raw.reserve, BUDGET_DEFAULTS.reserve, 1)),
    maxIdentifiers:
      raw.maxIdentifiers === undefined
        ? BUDGET_DEFAULTS.maxIdentifiers
        : positiveInteger('budget.maxIdentifiers', raw.maxIdentifiers, 10_000_000),
    ledgerTimeoutMs:
      raw.ledgerTimeoutMs === undefined
        ? BUDGET_DEFAULTS.ledgerTimeoutMs
        : durationMs('budget.ledgerTimeoutMs', raw.ledgerTimeoutMs),
    windowMs: policy.windowMs,
    limit,
    tauMs,
  });
}

/** `budget(region=eu of eu,us,ap)` for the region's policy description. */
export function describeBudget(config: BudgetConfig, policy: Policy): string {
  return `${policy.description} budget(region=${config.region} of ${config.regions.join(',')})`;
}
