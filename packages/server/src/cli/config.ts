// The policies file shared by `serve`, `inspect` and `audit`: limiter names mapped to policies.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  concurrency,
  fixedWindow,
  gcra,
  type Policy,
  SluiceError,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from 'sluice';
import { HEADER_STYLES, type HeaderStyle } from 'sluice/http';
import { GCRA_EXPIRY_ROUNDING_MS, MAX_PAUSE_MS, MAX_WAIT_MS } from 'sluice/internal';
import { CliError } from './errors.js';

/** The algorithms a config names, each built by the library's own factory (which validates it). */
const FACTORIES: Readonly<Record<string, (options: never) => Policy>> = {
  fixedWindow,
  slidingWindow,
  slidingLog,
  tokenBucket,
  gcra,
  concurrency,
};

export const ALGORITHMS = Object.keys(FACTORIES);

/** Options of `sluice serve`, from the config's `serve` section. */
export interface ServeSettings {
  readonly host: string;
  readonly port: number;
  /** The policy guarding the demo route `GET /demo`, keyed by client address; none when there are no policies. */
  readonly demoPolicy: string | undefined;
  /** Header styles the service writes: `ietf`, `draft-6`, `legacy`. */
  readonly headers: readonly HeaderStyle[];
}

/** A policy's limiter options besides the algorithm's: what to do when Redis fails or is late. */
export interface FailureSettings {
  readonly onStoreError?: 'allow' | 'deny' | 'fallback';
  readonly timeoutMs?: number;
}

/**
 * The `budget` section: how policies share one limit across regions when `serve --region` runs
 * (the region and the global store come from the flags). Checked by createLimiter when used.
 */
export interface BudgetSettings {
  readonly regions: readonly string[] | undefined;
  /** The policies that share a budget; undefined: every policy whose algorithm can. */
  readonly policies: readonly string[] | undefined;
  readonly leaseMs?: number;
  readonly floor?: number;
  readonly reserve?: number;
}

export interface Config {
  /** The file read, or undefined for the built-in defaults. */
  readonly path: string | undefined;
  readonly prefix: string;
  /** Limiter name -> policy. The name is part of every key: `<prefix>:<name>:{<identifier>}`. */
  readonly policies: ReadonlyMap<string, Policy>;
  /** Limiter name -> its `onStoreError` and `timeoutMs`, where the file gives them. */
  readonly failure: ReadonlyMap<string, FailureSettings>;
  /**
   * The policies whose decisions read what operators store for identifiers (`"overrides": true`:
   * `sluice limits` and `sluice deny`).
   */
  readonly overrides: ReadonlySet<string>;
  readonly serve: ServeSettings;
  readonly budget: BudgetSettings;
}

/**
 * Used when no file is found. The repository's sluice.config.json holds the same (a test keeps
 * them equal), so the default is documented where people look for it.
 */
export const DEFAULT_CONFIG = {
  prefix: 'rl',
  policies: {
    api: { algorithm: 'tokenBucket', capacity: 100, refillPerSecond: 10 },
    search: { algorithm: 'slidingWindow', limit: 60, windowMs: 60_000 },
    login: { algorithm: 'slidingLog', limit: 5, windowMs: 900_000, onStoreError: 'deny' },
    uploads: { algorithm: 'gcra', limit: 10, periodMs: 60_000, burst: 2 },
    demo: { algorithm: 'fixedWindow', limit: 5, windowMs: 10_000 },
  },
  serve: { host: '127.0.0.1', port: 8080, demoPolicy: 'demo', headers: ['ietf', 'draft-6'] },
} as const;

export const DEFAULT_CONFIG_FILE = 'sluice.config.json';

/**
 * The limiter options a policy entry may carry beside the algorithm's: `onStoreError` and
 * `timeoutMs`, as createLimiter takes them (it validates them, naming the option).
 */
export function failureFromSpec(where: string, spec: unknown): FailureSettings {
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) return {};
  const { onStoreError, timeoutMs } = spec as Record<string, unknown>;
  if (
    onStoreError !== undefined &&
    onStoreError !== 'allow' &&
    onStoreError !== 'deny' &&
    onStoreError !== 'fallback'
  ) {
    fail(
      where,
      `expected "onStoreError" to be "allow", "deny" or "fallback", got ${JSON.stringify(onStoreError)}.`,
    );
  }
  if (
    timeoutMs !== undefined &&
    (typeof timeoutMs !== 'number' || !Number.isSafeInteger(timeoutMs) || timeoutMs < 1)
  ) {
    fail(
      where,
      `expected "timeoutMs" to be a positive whole number of milliseconds, got ${JSON.stringify(timeoutMs)}.`,
    );
  }
  return {
    ...(onStoreError === undefined ? {} : { onStoreError: onStoreError as 'allow' | 'deny' | 'fallback' }),
    ...(timeoutMs === undefined ? {} : { timeoutMs: timeoutMs as number }),
  };
}

/** Whether a policy entry reads stored limits and denials (`"overrides": true`; false when absent). */
function overridesFromSpec(where: string, spec: unknown): boolean {
  const value = (spec as Record<string, unknown>).overrides;
  if (value === undefined) return false;
  if (typeof value !== 'boolean')
    fail(where, `expected "overrides" to be true or false, got ${JSON.stringify(value)}.`);
  return value;
}

/** Builds a policy from `{ "algorithm": "tokenBucket", ...the factory's options }`. */
export function policyFromSpec(where: string, spec: unknown): Policy {
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
    throw new CliError(
      `${where}: expected an object such as {"algorithm": "fixedWindow", "limit": 100, "windowMs": 60000}.`,
    );
  }
  // The limiter's own options travel beside the algorithm's; failureFromSpec reads them.
  const {
    algorithm,
    onStoreError: _onStoreError,
    timeoutMs: _timeoutMs,
    overrides: _overrides,
    ...options
  } = spec as Record<string, unknown>;
  const factory = typeof algorithm === 'string' ? FACTORIES[algorithm] : undefined;
  if (factory === undefined) {
    throw new CliError(
      `${where}: expected "algorithm" to be one of ${ALGORITHMS.join(', ')}, got ${JSON.stringify(algorithm)}.`,
    );
  }
  try {
    return factory(options as never);
  } catch (error) {
    if (error instanceof SluiceError) throw new CliError(`${where}: ${error.message}`, { cause: error });
    throw error;
  }
}

function fail(where: string, message: string): never {
  throw new CliError(`${where}: ${message}`);
}

function objectAt(where: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(where, 'expected an object.');
  return value as Record<string, unknown>;
}

function onlyKeys(where: string, value: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      fail(
        where,
        `unknown key ${JSON.stringify(key)}; expected ${known.map((k) => JSON.stringify(k)).join(', ')}.`,
      );
    }
  }
}

/** Validates a parsed config document; `where` names the file in messages. */
export function parseConfig(where: string, document: unknown, path: string | undefined): Config {
  const root = objectAt(where, document);
  onlyKeys(where, root, ['prefix', 'policies', 'serve', 'budget']);
  const prefix = root.prefix ?? 'rl';
  if (typeof prefix !== 'string' || !/^[\x21-\x7a|~]{1,128}$/.test(prefix)) {
    fail(
      `${where}: prefix`,
      `expected printable ASCII without spaces or braces, got ${JSON.stringify(prefix)}.`,
    );
  }
  const { policies, failure, overrides } = policySections(where, root.policies);
  return {
    path,
    prefix,
    policies,
    failure,
    overrides,
    serve: serveSettings(where, root.serve, policies),
    budget: budgetSettings(`${where}: budget`, root.budget, policies),
  };
}

/** The `policies` section: each named policy, its failure settings, and whether it reads overrides. */
function policySections(where: string, section: unknown): Pick<Config, 'policies' | 'failure' | 'overrides'> {
  const policies = new Map<string, Policy>();
  const failure = new Map<string, FailureSettings>();
  const overrides = new Set<string>();
  const specs = objectAt(`${where}: policies`, section ?? {});
  for (const [name, spec] of Object.entries(specs)) {
    if (!/^[\x21-\x7a|~]{1,128}$/.test(name)) {
      fail(
        `${where}: policies`,
        `the name ${JSON.stringify(name)} cannot be part of a key (printable ASCII, no spaces or braces).`,
      );
    }
    policies.set(name, policyFromSpec(`${where}: policies.${name}`, spec));
    failure.set(name, failureFromSpec(`${where}: policies.${name}`, spec));
    if (overridesFromSpec(`${where}: policies.${name}`, spec)) overrides.add(name);
  }
  return { policies, failure, overrides };
}

/** The `serve` section, its demo policy checked against the policies defined. */
function serveSettings(
  where: string,
  section: unknown,
  policies: ReadonlyMap<string, Policy>,
): ServeSettings {
  const serveRaw = objectAt(`${where}: serve`, section ?? {});
  onlyKeys(`${where}: serve`, serveRaw, ['host', 'port', 'demoPolicy', 'headers']);
  const host = serveRaw.host ?? DEFAULT_CONFIG.serve.host;
  const port = serveRaw.port ?? DEFAULT_CONFIG.serve.port;
  const demoPolicy = serveRaw.demoPolicy ?? DEFAULT_CONFIG.serve.demoPolicy;
  if (typeof host !== 'string' || host === '')
    fail(`${where}: serve.host`, `expected a host name or address, got ${JSON.stringify(host)}.`);
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) {
    fail(`${where}: serve.port`, `expected a port from 0 to 65535, got ${JSON.stringify(port)}.`);
  }
  // The default names the default file's demo policy; a config without one guards the demo with its first.
  const demo =
    serveRaw.demoPolicy === undefined && !policies.has(demoPolicy as string)
      ? policies.keys().next().value
      : demoPolicy;
  if (demo !== undefined && (typeof demo !== 'string' || !policies.has(demo))) {
    fail(
      `${where}: serve.demoPolicy`,
      `expected the name of one of the policies (${[...policies.keys()].join(', ')}), got ${JSON.stringify(demo)}.`,
    );
  }
  const headerList = serveRaw.headers ?? ['ietf'];
  const headers = typeof headerList === 'string' ? [headerList] : headerList;
  if (!Array.isArray(headers) || !headers.every((style) => HEADER_STYLES.includes(style as HeaderStyle))) {
    fail(
      `${where}: serve.headers`,
      `expected a list of ${HEADER_STYLES.map((style) => JSON.stringify(style)).join(', ')}, got ${JSON.stringify(headerList)}.`,
    );
  }
  return { host, port, demoPolicy: demo, headers: headers as HeaderStyle[] };
}

function stringList(where: string, value: unknown): readonly string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item !== '')) {
    fail(where, `expected a list of names, got ${JSON.stringify(value)}.`);
  }
  return value as string[];
}

/** The `budget` section, its numbers left to createLimiter (which names the option it refuses). */
function budgetSettings(
  where: string,
  value: unknown,
  policies: ReadonlyMap<string, Policy>,
): BudgetSettings {
  const raw = objectAt(where, value ?? {});
  onlyKeys(where, raw, ['regions', 'policies', 'leaseMs', 'floor', 'reserve']);
  const named = stringList(`${where}.policies`, raw.policies);
  for (const name of named ?? []) {
    if (!policies.has(name)) {
      fail(
        `${where}.policies`,
        `${JSON.stringify(name)} is not one of the policies (${[...policies.keys()].join(', ')}).`,
      );
    }
  }
  const numbers: Record<string, number> = {};
  for (const key of ['leaseMs', 'floor', 'reserve'] as const) {
    const number = raw[key];
    if (number === undefined) continue;
    if (typeof number !== 'number')
      fail(`${where}.${key}`, `expected a number, got ${JSON.stringify(number)}.`);
    numbers[key] = number;
  }
  return { regions: stringList(`${where}.regions`, raw.regions), policies: named, ...numbers };
}

/**
 * The user's config: the `--config` file, else `$SLUICE_CONFIG`, else ./sluice.config.json when
 * present; undefined when there is none. A file that was asked for must exist.
 */
export function findConfig(flag: string | undefined): Config | undefined {
  const asked = flag ?? process.env.SLUICE_CONFIG;
  const path = resolve(asked ?? DEFAULT_CONFIG_FILE);
  if (asked === undefined && !existsSync(path)) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new CliError(
      code === 'ENOENT'
        ? `Config file ${path} does not exist.`
        : `Cannot read config file ${path}: ${code ?? String(error)}.`,
    );
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new CliError(`Config file ${path} is not valid JSON: ${(error as Error).message}.`);
  }
  return parseConfig(asked ?? DEFAULT_CONFIG_FILE, document, path);
}

/**
 * The user's config, or the built-in defaults when there is none: for `sluice serve`, whose demo
 * policies guard its own keys. Tools that judge a user's keys use {@link findConfig} instead.
 */
export function loadConfig(flag: string | undefined): Config {
  return findConfig(flag) ?? parseConfig('built-in config', DEFAULT_CONFIG, undefined);
}

/** Why a tool will not guess policies, for the messages of `audit` and `inspect`. */
export const NO_CONFIG = `no config file was given (--config, $SLUICE_CONFIG) or found here (./${DEFAULT_CONFIG_FILE})`;

/**
 * The longest TTL a policy's script ever sets: the window for the fixed window and the log, two
 * windows for the sliding window (the current count outlives its window as the next one's
 * "previous"), the tolerance (burst x interval) for GCRA and the token bucket, plus the longest a
 * slot may be scheduled ahead (wait()'s `maxWaitMs`), the longest pause an upstream may ask for and
 * a second (on the server's clock such a key expires at the whole second after its TAT),
 * and two lease lengths for the leases (a lease length past the last slot, which lasts at most one).
 */
export function maxTtlMs(policy: Policy): number {
  const parameter = policy.rule.parameters[1];
  switch (policy.rule.name) {
    case 'sliding-window':
    case 'concurrency':
      return 2 * parameter;
    case 'gcra':
      // A slot scheduled by wait() or throttle() keeps the key up to the longest wait (and pause) longer.
      return Math.ceil(parameter) + MAX_WAIT_MS + MAX_PAUSE_MS + GCRA_EXPIRY_ROUNDING_MS;
    default:
      return parameter;
  }
}

/** The Redis type a policy's state has. */
export function stateType(policy: Policy): 'string' | 'zset' {
  return policy.rule.name === 'sliding-log' || policy.rule.name === 'concurrency' ? 'zset' : 'string';
}
