// Middleware options shared by every adapter: their types, defaults, and the one path that validates them.
import type { Group } from '../core/index.js';
import { invalidOption } from '../errors.js';
import type { MetricsRecorder } from '../hooks.js';
import { resolveRecorder } from '../options.js';
import { knownKeys, optionsObject } from '../validate.js';
import { clientIp, isKeyExtractor, type KeyExtractor } from './client-key.js';
import { HEADER_STYLES, type HeaderStyle, RATELIMIT_FIELD_STYLES } from './header-styles.js';
import { chosenStyles } from './headers.js';
import { type AccessLists, resolveLists } from './lists.js';
import { type PartitionKeyOption, partitionKeyHasher } from './partition-key.js';
import {
  type BanOptions,
  type BlockOptions,
  type Penalties,
  penaltiesPerGroup,
  resolvePenalties,
} from './penalties.js';
import type { ProblemOptions } from './problem.js';
import { type GroupSelector, groupSelector, type LimiterSet, type RouteRule } from './routes.js';
import { resolveWarnings, type SluiceWarning, type WarningOptions, type Warnings } from './warnings.js';

export type { LimiterSet, RouteRule } from './routes.js';

/**
 * A built-in extractor, or a function of the framework's request returning one identifier for
 * every limiter, or one per limiter in order (e.g. `[userId, tenantId]`, with a `tag`), sync or async.
 */
export type KeySource<Req> =
  | KeyExtractor
  | ((
      request: Req,
    ) => string | readonly string[] | undefined | Promise<string | readonly string[] | undefined>);

/** A request's quota: one for every limiter, one per limiter (`undefined`: the policy's own), or none. */
export type RequestLimit = number | readonly (number | undefined)[] | undefined;

/**
 * Options every adapter accepts. `Req` is the framework's request (or context, for Hono and Koa);
 * `Res` is the response `settle` is given.
 */
export interface RateLimitOptions<Req, Res = unknown> {
  /**
   * The limiter(s) for every request, or a function choosing them per request (`undefined`: not
   * limited). Requests matching `routes` use the route's limiters instead.
   */
  readonly limiter?: LimiterSet | ((request: Req) => LimiterSet | undefined);
  /** Per-route limiters, tried in order before `limiter`. */
  readonly routes?: readonly RouteRule[];
  /**
   * Counts the decisions of every limiter this middleware uses (see `sluice/metrics`), as each
   * limiter's own `metrics` option would.
   * @default undefined (each limiter's own recorder, if any)
   */
  readonly metrics?: MetricsRecorder;
  /**
   * Whose quota a request uses: `clientIp()`, `headerKey('x-api-key')`, or a function.
   * @default clientIp() (the socket's peer; no proxy trusted)
   */
  readonly key?: KeySource<Req>;
  /**
   * A hash tag for the request's keys (see `CallOptions.tag`): with a `key` that returns one
   * identifier per limiter, a shared tag (the tenant) lets one script decide them all on Redis Cluster.
   * @default undefined (each identifier is its own tag)
   */
  readonly tag?: string | ((request: Req) => string | undefined | Promise<string | undefined>);
  /**
   * A request without a usable key (no address, no header, a key over 1 KiB): `shared` puts all
   * of them in one bucket keyed `(unknown)`; `deny` answers 400 with a problem body.
   * @default 'shared'
   */
  readonly missingKey?: 'shared' | 'deny';
  /**
   * This request's quota instead of the policies' own (plans, API keys): a number for every
   * limiter, one per limiter in order (`undefined` keeps a policy's own), or a function of the
   * request returning either, sync or async. Decided by the limiters as `limiter.limit(id, { limit })`
   * decides; headers and the decision in the handler report it.
   * @default each policy's own
   * @example (req) => (req.user?.plan === 'pro' ? 1000 : 100)
   */
  readonly limit?: RequestLimit | ((request: Req) => RequestLimit | Promise<RequestLimit>);
  /**
   * Units a request takes: a number, or a function of the request. 0 lets the request through
   * without counting it (and, with `settle`, without settling it: `cost: 0` with `settle` is
   * refused, and a function that answers 0 leaves that request unlimited).
   * @default 1
   */
  readonly cost?: number | ((request: Req) => number | Promise<number>);
  /**
   * The actual cost of a request, known once its response has finished (the tokens an upstream
   * reported, the bytes served: `bodyBytes()`): `cost` is then the estimate, taken before the
   * handler runs, and the difference is given back when lower, or charged when higher, into debt
   * if need be (see `limiter.charge()`), so that the client's next requests are refused until its
   * debt is paid. Called once per allowed request, also when the response was closed before it
   * finished. What it throws, or a charge the store fails, goes to `onRefundError`.
   * @default undefined (the cost taken before the handler is the cost)
   * @example (req, res) => res.locals.usage?.total_tokens ?? 100
   */
  readonly settle?: (request: Req, response: Res) => number | Promise<number>;
  /** Requests for which this returns true are not limited and get no headers. */
  readonly skip?: (request: Req) => boolean | Promise<boolean>;
  /**
   * Clients never limited, by their key: identifiers as the key gives them, and for address keys
   * (`clientIp()`) addresses and CIDR ranges, IPv4 and IPv6. Such a request is not counted and gets
   * no headers. Wins over `deny`. To change lists at run time, see `limiter.deny()`.
   * @default undefined (none)
   * @example ['10.0.0.0/8', '2001:db8:1::/48', 'monitoring-key']
   */
  readonly allow?: readonly string[];
  /**
   * Clients always refused, by their key (as for `allow`): 403 with a problem body, no limiter
   * asked. Counted by the limiters' recorders (`sluice_list_denials_total{list="middleware"}`).
   * @default undefined (none)
   * @example ['203.0.113.0/24', '2001:db8:bad::/48']
   */
  readonly deny?: readonly string[];
  /**
   * Which responses keep their units: every one, only failed ones (successes are refunded once
   * the response is finished; e.g. failed logins), or only successful ones.
   * @default 'all'
   */
  readonly count?: 'all' | 'failed' | 'successful';
  /**
   * What counts as failed for `count`. A response that never finished counts as failed.
   * @default (status) => status >= 400
   */
  readonly isFailure?: (status: number) => boolean;
  /**
   * Header styles to write, or `false` for none (`Retry-After` is still sent with a 429).
   * @default 'ietf'
   */
  readonly headers?: HeaderStyle | readonly HeaderStyle[] | false;
  /** Overrides for the 429 problem body's `type` and `title`. */
  readonly problem?: ProblemOptions;
  /**
   * Receives errors of what is given back or charged after the response (count modes, refused
   * combinations, lease releases, `settle`).
   */
  readonly onRefundError?: (error: unknown) => void;
  /**
   * While a response runs, renew the leases its concurrency limiters hold (each for its policy's
   * `leaseMs`) every this many ms, so that a response longer than `leaseMs` keeps its slots while a
   * crashed process still frees them within `leaseMs`. `true` renews at half the shortest
   * `leaseMs`. One `unref`'d timer per request that holds a lease, cleared when it finishes.
   * @default false
   */
  readonly extendLeases?: boolean | number;
  /**
   * Bans clients that keep being refused: after `after` refusals within `windowMs`, the next
   * refused request starts a ban of `durationMs` during which every request gets 403. Kept in the
   * limiters' store (one more look per request, one or two more calls per refusal).
   * @default undefined (no ban)
   * @example { after: 5, windowMs: 60_000, durationMs: 15 * 60_000 }
   */
  readonly ban?: BanOptions;
  /**
   * Keeps refusing a refused client for `durationMs` (429, `Retry-After` the block's length),
   * whatever its limiters would say by then. Kept in the limiters' store.
   * @default undefined (no block)
   */
  readonly block?: BlockOptions;
  /**
   * Adds the IETF `pk` parameter to the `ietf` and `draft-8` items: a keyed hash of the client's
   * key (never the key: an address cannot be read back). `true` makes a secret per process; give
   * `{ secret }` so that every process of a fleet sends the same `pk`.
   * @default false
   */
  readonly partitionKey?: PartitionKeyOption;
  /**
   * Warnings about configurations that fail silently, each given once per middleware (see
   * WARNING_CODES): `false` for none, or `{ CODE: false }` to turn one off.
   * @default true
   */
  readonly warnings?: WarningOptions;
  /**
   * Receives each warning.
   * @default process.emitWarning (type `SluiceWarning`, with the code), or console.warn
   */
  readonly onWarning?: (warning: SluiceWarning) => void;
}

/** The resolved, validated configuration the core runs on. */
export interface ResolvedOptions<Req> {
  /** The limiters for a request, as one group; `undefined` when it is not limited. */
  readonly selectGroup: GroupSelector<Req>;
  readonly key: KeySource<Req>;
  readonly tag: string | ((request: Req) => string | undefined | Promise<string | undefined>) | undefined;
  readonly missingKey: 'shared' | 'deny';
  readonly limit: RequestLimit | ((request: Req) => RequestLimit | Promise<RequestLimit>);
  readonly cost: number | ((request: Req) => number | Promise<number>);
  /** The actual cost once the response finished; the adapter's response type is its own. */
  readonly settle: ((request: Req, response: unknown) => number | Promise<number>) | undefined;
  readonly skip: ((request: Req) => boolean | Promise<boolean>) | undefined;
  /** The `allow` and `deny` lists; `undefined` without either. */
  readonly lists: AccessLists | undefined;
  readonly count: 'all' | 'failed' | 'successful';
  readonly isFailure: (status: number) => boolean;
  /** The header styles to write, chosen once (duplicates dropped; see `chosenStyles`). */
  readonly styles: readonly HeaderStyle[];
  readonly problem: ProblemOptions;
  readonly onRefundError: (error: unknown) => void;
  /** How often leases are renewed while a response runs: ms, `'half'` of the shortest `leaseMs`, or never. */
  readonly extendLeases: number | 'half' | undefined;
  /** The penalties following a group; `undefined` without `ban` and `block`. */
  readonly penalties: ((group: Group) => Penalties) | undefined;
  readonly partitionKey: ((key: string) => Uint8Array) | undefined;
  readonly warnings: Warnings;
  /**
   * Whether a request without a peer address is a configuration error when keyed by address: set
   * by adapters whose runtime must be asked for the address (fetch, Hono). Node's sockets always
   * have one unless the client has already gone.
   */
  readonly addressRequired: boolean;
}

/** What an adapter tells the options path about itself. */
export interface AdapterTraits {
  /** See {@link ResolvedOptions.addressRequired}. */
  readonly addressRequired?: boolean;
}

/** The option names of {@link RateLimitOptions}; adapters add their own. */
export const CORE_OPTION_KEYS = [
  'limiter',
  'routes',
  'metrics',
  'key',
  'tag',
  'missingKey',
  'limit',
  'cost',
  'settle',
  'skip',
  'allow',
  'deny',
  'count',
  'isFailure',
  'headers',
  'problem',
  'onRefundError',
  'extendLeases',
  'ban',
  'block',
  'partitionKey',
  'warnings',
  'onWarning',
] as const;

function optionalFunction(option: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') throw invalidOption(option, 'a function', value);
}

/** An adapter's own optional function option, checked. */
export function adapterFunction<F>(option: string, value: F | undefined): F | undefined {
  optionalFunction(option, value);
  return value;
}

function headerStyles(value: unknown): readonly HeaderStyle[] {
  if (value === false) return [];
  if (value === undefined) return ['ietf'];
  const list = Array.isArray(value) ? value : [value];
  if (!list.every((style) => HEADER_STYLES.includes(style as HeaderStyle))) {
    throw invalidOption(
      'headers',
      `false, ${HEADER_STYLES.map((style) => `'${style}'`).join(', ')}, or an array of them`,
      value,
    );
  }
  const fieldStyles = list.filter((style) => RATELIMIT_FIELD_STYLES.includes(style as HeaderStyle));
  if (new Set(fieldStyles).size > 1) {
    throw invalidOption(
      'headers',
      "at most one of 'ietf', 'draft-8' and 'draft-7' (each writes the RateLimit field)",
      value,
    );
  }
  // Chosen once here (duplicates dropped): requests write them as they are.
  return Object.freeze(chosenStyles(list as HeaderStyle[]));
}

function isLimitValue(value: unknown): boolean {
  const one = (item: unknown) => typeof item === 'number' && Number.isSafeInteger(item) && item >= 1;
  return one(value) || (Array.isArray(value) && value.every((item) => item === undefined || one(item)));
}

function limitOption(value: unknown): ResolvedOptions<unknown>['limit'] {
  if (value === undefined || typeof value === 'function' || isLimitValue(value)) {
    return value as ResolvedOptions<unknown>['limit'];
  }
  throw invalidOption(
    'limit',
    'a positive integer, an array of them (one per limiter), or a function of the request',
    value,
  );
}

type RawOptions = Record<string, unknown>;

/** Whose quota a request takes from: `tag`, `key` (by default the client's address) and `missingKey`. */
function identityOptions<Req>(raw: RawOptions): Pick<ResolvedOptions<Req>, 'tag' | 'key' | 'missingKey'> {
  const tag = raw.tag;
  if (tag !== undefined && typeof tag !== 'function' && typeof tag !== 'string') {
    throw invalidOption('tag', 'a string or a function of the request', tag);
  }
  const key = raw.key ?? clientIp();
  if (typeof key !== 'function' && !isKeyExtractor(key)) {
    throw invalidOption('key', 'clientIp(), headerKey(name), or a function of the request', key);
  }
  const missingKey = raw.missingKey ?? 'shared';
  if (missingKey !== 'shared' && missingKey !== 'deny')
    throw invalidOption('missingKey', "'shared' or 'deny'", missingKey);
  return { tag: tag as ResolvedOptions<Req>['tag'], key: key as KeySource<Req>, missingKey };
}

/** What a request takes and when it counts: `cost` (with `settle`) and `count`. */
function costOptions<Req>(raw: RawOptions): Pick<ResolvedOptions<Req>, 'cost' | 'count'> {
  const cost = raw.cost ?? 1;
  if (typeof cost !== 'function' && (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0)) {
    throw invalidOption('cost', 'a whole number of at least 0, or a function of the request', cost);
  }
  // A request of cost 0 is let through uncounted, and what is not counted is never settled.
  if (cost === 0 && raw.settle !== undefined) {
    throw invalidOption(
      'cost',
      'an estimate of at least 1 with `settle` (a request of cost 0 is not counted, so nothing is settled)',
      cost,
    );
  }
  const count = raw.count ?? 'all';
  if (count !== 'all' && count !== 'failed' && count !== 'successful') {
    throw invalidOption('count', "'all', 'failed' or 'successful'", count);
  }
  return { cost: cost as ResolvedOptions<Req>['cost'], count };
}

/** The `problem` option: the `type` and `title` of refusals' problem details. */
function problemOption(value: unknown): ProblemOptions {
  const problem = value === undefined ? {} : optionsObject('problem', value, true);
  knownKeys('problem', problem, ['type', 'title']);
  for (const name of ['type', 'title'] as const) {
    if (problem[name] !== undefined && typeof problem[name] !== 'string') {
      throw invalidOption(`problem.${name}`, 'a string', problem[name]);
    }
  }
  return problem as ProblemOptions;
}

/** `extendLeases`: `true` renews at half the shortest `leaseMs`, a number every that many ms, else never. */
function extendLeasesOption(renew: unknown): ResolvedOptions<unknown>['extendLeases'] {
  if (renew === true) return 'half';
  if (renew === false || renew === undefined) return undefined;
  if (Number.isSafeInteger(renew) && (renew as number) >= 1) return renew as number;
  throw invalidOption('extendLeases', 'true, false, or a whole number of milliseconds of at least 1', renew);
}

/**
 * Validates middleware options and applies defaults; throws a SluiceError naming the first bad
 * option. `adapterKeys` are the options the calling adapter adds (and validates itself).
 */
export function resolveRateLimitOptions<Req, Res = unknown>(
  adapter: string,
  options: RateLimitOptions<Req, Res>,
  adapterKeys: readonly string[] = [],
  traits: AdapterTraits = {},
): ResolvedOptions<Req> {
  const raw = optionsObject(`${adapter} options`, options, true);
  knownKeys(adapter, raw, [...CORE_OPTION_KEYS, ...adapterKeys]);
  // In this order, so that the first bad option named is the same as ever.
  const selectGroup = groupSelector<Req>(raw.limiter, raw.routes, resolveRecorder('metrics', raw.metrics));
  const identity = identityOptions<Req>(raw);
  const { cost, count } = costOptions<Req>(raw);
  for (const name of ['skip', 'settle', 'isFailure', 'onRefundError'] as const)
    optionalFunction(name, raw[name]);
  const problem = problemOption(raw.problem);
  const penalties = resolvePenalties(raw.ban, raw.block);
  const extendLeases = extendLeasesOption(raw.extendLeases);

  return Object.freeze({
    selectGroup,
    ...identity,
    limit: limitOption(raw.limit) as ResolvedOptions<Req>['limit'],
    cost,
    settle: raw.settle as ResolvedOptions<Req>['settle'],
    skip: raw.skip as ResolvedOptions<Req>['skip'],
    lists: resolveLists(raw.allow, raw.deny),
    count,
    isFailure:
      (raw.isFailure as ((status: number) => boolean) | undefined) ?? ((status: number) => status >= 400),
    styles: headerStyles(raw.headers),
    problem,
    onRefundError: (raw.onRefundError as ((error: unknown) => void) | undefined) ?? (() => {}),
    extendLeases,
    penalties: penalties === undefined ? undefined : penaltiesPerGroup(penalties),
    partitionKey: partitionKeyHasher(raw.partitionKey),
    warnings: resolveWarnings(raw.warnings, raw.onWarning),
    addressRequired: traits.addressRequired === true,
  });
}
