// loginGuard(): failed logins logged per username and per IP in sliding logs, failing closed when the store fails.
import { slidingLog } from './algorithms/sliding-log.js';
import { checkIdentifier, Pipeline, RateLimiter } from './core/index.js';
import { SluiceError } from './errors.js';
import type { MetricsRecorder } from './hooks.js';
import { resolveLimiterOptions, resolveRecorder } from './options.js';
import {
  type Decision,
  isStoreFailure,
  type Limiter,
  type Policy,
  type Store,
  type StoreFailure,
} from './types.js';
import { durationMs, keyPart, knownKeys, optionsObject, positiveInteger } from './validate.js';

/** One dimension's budget of failures. */
export interface LoginBudget {
  /** Failures allowed within `windowMs`. */
  readonly limit: number;
  /** The window, in ms. */
  readonly windowMs: number;
}

/** Options of {@link loginGuard}. */
export interface LoginGuardOptions {
  /** Where the failure logs live; a RedisStore in production (each log is one sorted set). */
  readonly store: Store;
  /**
   * Failures per username, whichever IP they come from.
   * @default { limit: 5, windowMs: 900000 } (5 per 15 minutes)
   */
  readonly perUsername?: LoginBudget;
  /**
   * Failures per client IP (or IPv6 prefix: pass the key sluice's IP extractor gives), whichever
   * usernames they try.
   * @default { limit: 100, windowMs: 900000 } (100 per 15 minutes)
   */
  readonly perIp?: LoginBudget;
  /**
   * The limiters' names are `<name>:user` and `<name>:ip`, so keys read `rl:login:user:{alice}`.
   * @default 'login'
   */
  readonly name?: string;
  /**
   * How long to wait for the store before refusing (the guard fails closed). A client that queues
   * commands while disconnected would otherwise keep the login waiting until Redis came back.
   * @default 1000
   */
  readonly timeoutMs?: number;
  /** Milliseconds since the epoch; by default the store's clock (Redis's `TIME`). For tests. */
  readonly clock?: () => number;
  /**
   * Counts the guard's decisions (see `sluice/metrics`), under the limiters' names `<name>:user`
   * and `<name>:ip`.
   * @default undefined (no metrics)
   */
  readonly metrics?: MetricsRecorder;
}

/** The two budgets a login attempt is checked against. */
export type LoginDimension = 'username' | 'ip';

/** What the guard says about a login attempt (`check`) or a recorded failure (`failed`). */
export interface LoginDecision {
  /**
   * `check`: whether the attempt may go on to authentication. `failed`: whether the failure was
   * recorded in both logs (false once a log is full: the attempt was over a limit).
   */
  readonly allowed: boolean;
  /** The dimensions that refused (or could not be asked), in the order username, ip. Empty when allowed. */
  readonly blockedBy: readonly LoginDimension[];
  /**
   * 0 when allowed; otherwise ms until an attempt would be allowed: the largest wait among the
   * dimensions that answered and refused. A dimension whose store could not be asked adds no wait
   * (no one knows how long the outage lasts), so a refusal for a failed store alone says 0.
   */
  readonly retryAfterMs: number;
  /** The username dimension's decision; undefined when the store could not be asked. */
  readonly username: Decision | undefined;
  /** The IP dimension's decision; undefined when the store could not be asked. */
  readonly ip: Decision | undefined;
  /**
   * Present when the refusal comes from the store failing rather than from a limit: `store-error`
   * or `timeout`. The guard fails closed; answer 503 rather than 429.
   */
  readonly reason?: StoreFailure;
  /** The store's error, when `reason` is present and the error reached the guard. */
  readonly error?: SluiceError;
}

/** A login guard: check before authenticating, report the outcome after. */
export interface LoginGuard {
  /** The failure logs, for tools and tests. */
  readonly limiters: { readonly username: Limiter; readonly ip: Limiter };
  /** Whether an attempt may be made now. Consumes nothing. Refuses when the store fails. */
  check(username: string, ip: string): Promise<LoginDecision>;
  /** Records a failed attempt against the username and the IP, each on its own. */
  failed(username: string, ip: string): Promise<LoginDecision>;
  /** Forgets the username's failures (its IP's stay). Rejects with ERR_SLUICE_STORE when the store fails. */
  succeeded(username: string): Promise<void>;
}

const DEFAULTS = {
  perUsername: { limit: 5, windowMs: 15 * 60_000 },
  perIp: { limit: 100, windowMs: 15 * 60_000 },
  name: 'login',
  timeoutMs: 1000,
} as const;

/**
 * The key a username is counted under: Unicode NFKC, then case folded (upper then lower case,
 * locale-independent, so `ß` and `SS` fold alike), then trimmed. `Alice`, `ALICE`, `ａｌｉｃｅ`
 * (full-width) and ` alice ` share one budget. Folding too much only merges budgets, which is
 * stricter; folding too little would let an attacker multiply the budget by respelling a name.
 */
export function normalizeUsername(username: string): string {
  return username.normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC').trim();
}

function budget(option: string, value: unknown, fallback: LoginBudget): LoginBudget {
  if (value === undefined) return fallback;
  const raw = optionsObject(option, value, true);
  knownKeys(option, raw, ['limit', 'windowMs']);
  return {
    limit: positiveInteger(`${option}.limit`, raw.limit),
    windowMs: durationMs(`${option}.windowMs`, raw.windowMs),
  };
}

/** The guard's options, validated, with their defaults. */
interface GuardSettings {
  readonly store: Store;
  readonly perUsername: LoginBudget;
  readonly perIp: LoginBudget;
  readonly name: string;
  readonly timeoutMs: number;
  readonly clock: (() => number) | undefined;
  readonly metrics: MetricsRecorder | undefined;
}

function guardSettings(options: LoginGuardOptions): GuardSettings {
  const raw = optionsObject('loginGuard options', options, true);
  knownKeys('loginGuard', raw, ['store', 'perUsername', 'perIp', 'name', 'timeoutMs', 'clock', 'metrics']);
  return {
    // The limiters validate the store and the clock, naming them.
    store: raw.store as Store,
    perUsername: budget('loginGuard.perUsername', raw.perUsername, DEFAULTS.perUsername),
    perIp: budget('loginGuard.perIp', raw.perIp, DEFAULTS.perIp),
    name: raw.name === undefined ? DEFAULTS.name : keyPart('loginGuard.name', raw.name),
    timeoutMs:
      raw.timeoutMs === undefined
        ? DEFAULTS.timeoutMs
        : positiveInteger('loginGuard.timeoutMs', raw.timeoutMs, 2 ** 31 - 1),
    clock: raw.clock as (() => number) | undefined,
    metrics: resolveRecorder('loginGuard.metrics', raw.metrics),
  };
}

/** One dimension's failure log: a sliding log that waits `timeoutMs` for the store and fails closed, as a login check should. */
function dimension(settings: GuardSettings, budgetOf: LoginBudget, suffix: string): Pipeline {
  const { store, timeoutMs, clock, metrics } = settings;
  const policy: Policy = slidingLog(budgetOf);
  return new Pipeline(
    resolveLimiterOptions({
      store,
      policy,
      name: `${settings.name}:${suffix}`,
      timeoutMs,
      onStoreError: 'deny',
      ...(clock === undefined ? {} : { clock }),
      ...(metrics === undefined ? {} : { metrics }),
    }),
  );
}

/** The username (normalized) and the IP of an attempt, or the error naming the bad one. */
function attemptKeys(user: unknown, address: unknown): [string, string] | SluiceError {
  const invalid = checkIdentifier(user, 'username') ?? checkIdentifier(address, 'ip');
  if (invalid !== undefined) return invalid;
  const normalized = normalizeUsername(user as string);
  return checkIdentifier(normalized, 'username (normalized)') ?? [normalized, address as string];
}

const DIMENSIONS: readonly LoginDimension[] = ['username', 'ip'];

/** The guard's answer from each dimension's decision, and the store error behind a failed one. */
function verdict(
  decisions: readonly Decision[],
  errors: readonly (SluiceError | undefined)[],
): LoginDecision {
  const blockedBy: LoginDimension[] = [];
  let retryAfterMs = 0;
  let reason: StoreFailure | undefined;
  let error: SluiceError | undefined;
  decisions.forEach((decision, i) => {
    const dimension = DIMENSIONS[i] as LoginDimension;
    if (isStoreFailure(decision.reason)) {
      // The limiter answered for a failed store (it fails closed): the guard refuses, saying why.
      blockedBy.push(dimension);
      reason ??= decision.reason;
      error ??= errors[i];
    } else if (!decision.allowed) {
      blockedBy.push(dimension);
      if (decision.retryAfterMs > retryAfterMs) retryAfterMs = decision.retryAfterMs;
    }
  });
  const answered = (decision: Decision | undefined): Decision | undefined =>
    decision === undefined || isStoreFailure(decision.reason) ? undefined : decision;
  const decision: LoginDecision = {
    allowed: blockedBy.length === 0,
    blockedBy,
    retryAfterMs,
    username: answered(decisions[0]),
    ip: answered(decisions[1]),
  };
  if (reason === undefined) return decision;
  return error === undefined ? { ...decision, reason } : { ...decision, reason, error };
}

/**
 * Asks each dimension on its own (a failure is recorded in both logs even when one is full, the
 * strict side for a login), through its pipeline.
 */
async function askBoth(
  pipelines: readonly Pipeline[],
  operation: 'peek' | 'limit',
  user: string,
  address: string,
): Promise<LoginDecision> {
  const keys = attemptKeys(user, address);
  if (keys instanceof SluiceError) throw keys;
  const batch = pipelines.map((pipeline, i) => ({ pipeline, operation, identifier: keys[i], amount: 1 }));
  const { decisions, errors } = await Pipeline.batch(batch, false);
  return verdict(decisions, errors);
}

/**
 * Brute-force protection for logins: a sliding log of failures per username and per IP, two
 * single-key scripts on different slots (no shared tag: that would send every login through one
 * shard), and a refusal whenever the store cannot answer.
 *
 * @example
 * const guard = loginGuard({ store, perUsername: { limit: 5, windowMs: 15 * 60_000 }, perIp: { limit: 100, windowMs: 15 * 60_000 } });
 * const verdict = await guard.check(username, ip);
 * if (!verdict.allowed) return reply(verdict.reason ? 503 : 429, verdict.retryAfterMs);
 * if (await authenticate(username, password)) await guard.succeeded(username);
 * else await guard.failed(username, ip);
 */
export function loginGuard(options: LoginGuardOptions): LoginGuard {
  const settings = guardSettings(options);
  const pipelines = [
    dimension(settings, settings.perUsername, 'user'),
    dimension(settings, settings.perIp, 'ip'),
  ] as const;
  return {
    limiters: { username: new RateLimiter(pipelines[0]), ip: new RateLimiter(pipelines[1]) },
    check: (user, address) => askBoth(pipelines, 'peek', user, address),
    failed: (user, address) => askBoth(pipelines, 'limit', user, address),
    succeeded: async (user) => {
      const invalid = checkIdentifier(user, 'username');
      if (invalid !== undefined) throw invalid;
      const normalized = normalizeUsername(user);
      const empty = checkIdentifier(normalized, 'username (normalized)');
      if (empty !== undefined) throw empty;
      // Rejects with the store's failure (ERR_SLUICE_STORE, or ERR_SLUICE_TIMEOUT).
      await pipelines[0].reset(normalized, undefined);
    },
  };
}
