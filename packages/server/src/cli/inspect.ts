// `sluice inspect <limiter> <identifier>`: the stored state decoded, its TTL, and what the next request would get.
import {
  createLimiter,
  type Decision,
  type Limiter,
  MemoryStore,
  type Policy,
  RedisStore,
  SluiceError,
} from 'sluice';
import { BUDGET_DEFAULTS } from 'sluice/internal';
import {
  COMMON_FLAGS,
  COMMON_FLAGS_HELP,
  CONFIG_FLAGS,
  CONFIG_FLAGS_HELP,
  CONNECTION_FLAGS,
  CONNECTION_FLAGS_HELP,
  optional,
  parseDuration,
  parsePositiveInteger,
  parsePositiveNumber,
  stringFlag,
  type Values,
} from './args.js';
import type { Command, Context } from './command.js';
import { ALGORITHMS, type Config, findConfig, NO_CONFIG, policyFromSpec } from './config.js';
import { decodeState, type RawState } from './decode.js';
import { CliError, EXIT } from './errors.js';
import { ledgerText, readLedger } from './inspect-ledger.js';
import { regionState } from './inspect-region.js';
import { type InspectReport, inspectTextReport } from './inspect-report.js';
import { type Connection, connect, redisUrl } from './redis.js';

/** Flags that describe a policy on the command line, instead of the config file. */
export const POLICY_FLAGS = {
  algorithm: { type: 'string' },
  limit: { type: 'string' },
  window: { type: 'string' },
  period: { type: 'string' },
  burst: { type: 'string' },
  capacity: { type: 'string' },
  'refill-per-second': { type: 'string' },
} as const;

export const POLICY_FLAGS_HELP = `Policy (when the limiter is not in the config file, or to override it):
  --algorithm <name>  ${ALGORITHMS.join(', ')}
  --limit <n> --window <time>            fixedWindow, slidingWindow, slidingLog
  --limit <n> --period <time> [--burst <n>]  gcra
  --capacity <n> --refill-per-second <x>     tokenBucket`;

/**
 * The policy of limiter `name`: from the policy flags when given, else from the user's config. With
 * neither there is nothing to attribute the stored state to, and a guess would decode it wrongly.
 */
export function resolvePolicy(values: Values, config: Config | undefined, name: string): Policy {
  const algorithm = stringFlag(values, 'algorithm');
  if (algorithm === undefined) {
    if (config === undefined) {
      throw new CliError(
        `The policy of limiter ${JSON.stringify(name)} is unknown: ${NO_CONFIG}. Its state cannot be decoded without it (a fixed window's counter would read as a token bucket's time). Pass --config <file> with your application's policies, or give the policy with --algorithm (see \`sluice inspect --help\`).`,
      );
    }
    const policy = config.policies.get(name);
    if (policy !== undefined) return policy;
    throw new CliError(
      `No policy for limiter ${JSON.stringify(name)} in ${config.path}: add it there, or give it with --algorithm (see --help).`,
    );
  }
  const spec: Record<string, unknown> = { algorithm };
  const numberFlags: Array<[string, string, (flag: string, text: string) => number]> = [
    ['limit', 'limit', parsePositiveInteger],
    ['window', 'windowMs', parseDuration],
    ['period', 'periodMs', parseDuration],
    ['burst', 'burst', parsePositiveInteger],
    ['capacity', 'capacity', parsePositiveInteger],
    ['refill-per-second', 'refillPerSecond', parsePositiveNumber],
  ];
  for (const [flag, option, parse] of numberFlags) {
    const text = stringFlag(values, flag);
    if (text !== undefined) spec[option] = parse(flag, text);
  }
  return policyFromSpec('policy flags', spec);
}

const spec = {
  name: 'inspect',
  summary: "show an identifier's stored state, decoded, its TTL, and what its next request would get",
  positionals: ['limiter', 'identifier'],
  flags: {
    ...COMMON_FLAGS,
    ...CONNECTION_FLAGS,
    ...CONFIG_FLAGS,
    ...POLICY_FLAGS,
    cost: { type: 'string' },
    'global-redis': { type: 'string' },
    regions: { type: 'string' },
  },
  help: `Usage: sluice inspect <limiter> <identifier> [--redis URL] [--config file | --algorithm ...] [--cost n]

Reads the key <prefix>:<limiter>:{<identifier>} and shows its state decoded (window counts, the
theoretical arrival time and tokens, log entries), its TTL, and the decision the next request of
--cost units (default 1) would get, from limiter.peek(): nothing is consumed.

The limiter's policy comes from the config file (the same one \`sluice serve\` reads), where the
limiter name is the policy's key, or from the flags below.

${POLICY_FLAGS_HELP}

Options:
  --cost <n>          units the next request would ask (default 1)
  --global-redis <url>
                      for a policy whose limit regions share (see docs/regions.md): also show the
                      identifier's ledger in the global store, what each region was granted and asked
  --regions <a,b,c>   the regions' names in the budget's order (default: the config's budget.regions)
${CONNECTION_FLAGS_HELP}
${CONFIG_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 shown (also when there is no state: a fresh identifier), 2 could not run.`,
} as const;

/** Reads a key's type, value, PTTL and the server time, in one MULTI so they agree. */
export async function readState(
  connection: Connection,
  key: string,
): Promise<{ raw: RawState; ttlMs: number; nowMs: number }> {
  const type = String(await connection.client.type(key));
  const multi = connection.client.multi();
  if (type === 'string') multi.get(key);
  else if (type === 'zset') multi.zrange(key, '0', '-1', 'WITHSCORES');
  else multi.exists(key);
  multi.pttl(key).time();
  const replies = (await multi.exec()) ?? [];
  for (const [error] of replies) if (error !== null) throw error;
  const value = replies[0]?.[1];
  const ttlMs = Number(replies[1]?.[1]);
  const time = replies[2]?.[1] as [string, string];
  const nowMs = Number(time[0]) * 1000 + Number(time[1]) / 1000;
  let raw: RawState;
  if (type === 'string') raw = { type, value: String(value) };
  else if (type === 'zset') {
    const flat = value as string[];
    const entries: Array<{ member: string; scoreMs: number }> = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      entries.push({ member: flat[i] as string, scoreMs: Number(flat[i + 1]) });
    }
    raw = { type, entries };
  } else raw = { type };
  return { raw, ttlMs, nowMs };
}

interface InspectOptions {
  readonly name: string;
  readonly identifier: string;
  readonly policy: Policy;
  readonly prefix: string;
  readonly cost: number;
  readonly redis: string;
  readonly timeoutMs: number;
  readonly globalRedis: string | undefined;
  readonly regions: readonly string[] | undefined;
  /** The budget's lease (the config's `budget.leaseMs`, or the library's default): a bucket ledger's periods are half of it. */
  readonly leaseMs: number;
}

/** Reads the arguments and finds the policy; every refusal happens here, before connecting. */
function parse(values: Values, positionals: readonly string[]): InspectOptions {
  const [name, identifier] = positionals as [string, string];
  const config = findConfig(stringFlag(values, 'config'));
  return {
    name,
    identifier,
    policy: resolvePolicy(values, config, name),
    prefix: stringFlag(values, 'prefix') ?? config?.prefix ?? 'rl',
    cost: optional(values, 'cost', parsePositiveInteger, 1),
    redis: redisUrl(stringFlag(values, 'redis')),
    timeoutMs: optional(values, 'timeout', parseDuration, 5000),
    globalRedis: stringFlag(values, 'global-redis'),
    regions: stringFlag(values, 'regions')?.split(',') ?? config?.budget.regions,
    leaseMs: config?.budget.leaseMs ?? BUDGET_DEFAULTS.leaseMs,
  };
}

/**
 * The limiter to peek with: with `--global-redis`, the region's part of the budget (its ledger is
 * never asked: a peek is not counted), so that the next request is judged on what the region holds.
 */
function regionLimiter(options: InspectOptions, store: RedisStore): Limiter {
  const { name, policy, timeoutMs, regions, globalRedis } = options;
  if (globalRedis === undefined) return createLimiter({ store, policy, name, timeoutMs });
  if (regions === undefined) {
    throw new CliError(
      '`--global-redis` reads a budget shared by regions: give `--regions eu,us,ap` (or "regions" in the config\'s "budget" section).',
    );
  }
  const budget = { global: new MemoryStore(), region: regions[0] as string, regions };
  const limiter = createLimiter({ store, policy, name, timeoutMs, budget });
  limiter.close();
  return limiter;
}

/** The state read and decoded, and what the next request would get, from limiter.peek(). */
async function execute(connection: Connection, options: InspectOptions): Promise<InspectReport> {
  const { name, identifier, policy, cost } = options;
  const store = new RedisStore({ client: connection.client, prefix: options.prefix });
  const limiter = regionLimiter(options, store);
  const key = store.keyFor(name, identifier);
  const { raw, ttlMs, nowMs } = await readState(connection, key);
  let next: Decision;
  try {
    next = await limiter.peek(identifier, { cost });
    // inspect reports what Redis holds: a decision made without Redis would be a guess.
    if (next.reason !== undefined) {
      throw new CliError(`Redis did not answer the peek (${next.reason}); nothing to report.`);
    }
  } catch (error) {
    if (error instanceof SluiceError && error.code !== 'ERR_SLUICE_STORE') {
      throw new CliError(error.message, { cause: error });
    }
    throw error;
  }
  return {
    limiter: name,
    policy: policy.description,
    key,
    type: raw.type,
    raw: 'value' in raw ? raw.value : 'entries' in raw ? raw.entries : null,
    state:
      (options.regions !== undefined ? regionState(raw) : undefined) ??
      decodeState(policy, raw, nowMs, ttlMs),
    ttlMs: ttlMs >= 0 ? ttlMs : null,
    serverTimeMs: nowMs,
    // peek() tells what is left now; the request, when allowed, takes its cost from that.
    next: {
      cost,
      ...next,
      remainingAfter: next.allowed ? Math.max(0, next.remaining - cost) : next.remaining,
    },
  };
}

async function run(context: Context): Promise<number> {
  const options = parse(context.values, context.positionals);
  const connection = await connect(options.redis, options.timeoutMs);
  let report: InspectReport;
  try {
    report = await execute(connection, options);
  } finally {
    await connection.close();
  }
  if (options.globalRedis !== undefined) {
    const key = `${options.prefix}:budget:${options.name}:{${options.identifier}}`;
    const global = await readLedger(
      options.globalRedis,
      options.timeoutMs,
      key,
      options.regions,
      options.leaseMs,
    );
    context.out(
      context.json
        ? JSON.stringify({ ...report, global }, null, 2)
        : [inspectTextReport(report, options.policy), ...ledgerText(global, report.serverTimeMs)].join('\n'),
    );
    return EXIT.OK;
  }
  context.out(context.json ? JSON.stringify(report, null, 2) : inspectTextReport(report, options.policy));
  return EXIT.OK;
}

/** `sluice inspect`. */
export const inspect: Command = { ...spec, run };
