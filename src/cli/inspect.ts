// `sluice inspect <limiter> <identifier>`: the stored state decoded, its TTL, and what the next request would get.
import { createLimiter, type Decision, type Policy, RedisStore, SluiceError } from '../index.js';
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
import { ALGORITHMS, type Config, DEFAULT_CONFIG_FILE, loadConfig, policyFromSpec } from './config.js';
import { decodeState, type RawState, type StateView } from './decode.js';
import { CliError, EXIT } from './errors.js';
import { formatDuration, formatNumber } from './output.js';
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

/** The policy of limiter `name`: from the policy flags when given, else from the config. */
export function resolvePolicy(values: Values, config: Config, name: string): Policy {
  const algorithm = stringFlag(values, 'algorithm');
  if (algorithm === undefined) {
    const policy = config.policies.get(name);
    if (policy !== undefined) return policy;
    const where = config.path ?? `the built-in config (no ${DEFAULT_CONFIG_FILE} here)`;
    throw new CliError(
      `No policy for limiter ${JSON.stringify(name)} in ${where}: add it there, or give it with --algorithm (see --help).`,
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
  flags: { ...COMMON_FLAGS, ...CONNECTION_FLAGS, ...CONFIG_FLAGS, ...POLICY_FLAGS, cost: { type: 'string' } },
  help: `Usage: sluice inspect <limiter> <identifier> [--redis URL] [--config file | --algorithm ...] [--cost n]

Reads the key <prefix>:<limiter>:{<identifier>} and shows its state decoded (window counts, the
theoretical arrival time and tokens, log entries), its TTL, and the decision the next request of
--cost units (default 1) would get, from limiter.peek(): nothing is consumed.

The limiter's policy comes from the config file (the same one \`sluice serve\` reads), where the
limiter name is the policy's key, or from the flags below.

${POLICY_FLAGS_HELP}

Options:
  --cost <n>          units the next request would ask (default 1)
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

async function run(context: Context): Promise<number> {
  const { values, positionals } = context;
  const [name, identifier] = positionals as [string, string];
  const config = loadConfig(stringFlag(values, 'config'));
  const policy = resolvePolicy(values, config, name);
  const prefix = stringFlag(values, 'prefix') ?? config.prefix;
  const cost = optional(values, 'cost', parsePositiveInteger, 1);
  const timeoutMs = optional(values, 'timeout', parseDuration, 5000);
  const connection = await connect(redisUrl(stringFlag(values, 'redis')), timeoutMs);
  try {
    const store = new RedisStore({ client: connection.client, prefix });
    const limiter = createLimiter({ store, policy, name, timeoutMs });
    const key = store.keyFor(name, identifier);
    const { raw, ttlMs, nowMs } = await readState(connection, key);
    const state = decodeState(policy, raw, nowMs);
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
    const report = {
      limiter: name,
      policy: policy.description,
      key,
      type: raw.type,
      raw: 'value' in raw ? raw.value : 'entries' in raw ? raw.entries : null,
      state,
      ttlMs: ttlMs >= 0 ? ttlMs : null,
      serverTimeMs: nowMs,
      next: { cost, ...next },
    };
    context.out(context.json ? JSON.stringify(report, null, 2) : text(report, policy));
    return EXIT.OK;
  } finally {
    await connection.close();
  }
}

function time(ms: number): string {
  return new Date(ms).toISOString();
}

function describe(state: StateView, policy: Policy): string {
  if ('error' in state) return `unreadable: ${state.error}`;
  if ('windowIndex' in state && 'count' in state) {
    const window = `window ${state.windowIndex} (${time(state.windowStartMs)} to ${time(state.windowEndMs)})`;
    return state.current
      ? `${state.count} of ${policy.limit} used in ${window}`
      : `${state.count} used in ${window}, which has ended: stale, the current window starts empty`;
  }
  if ('estimate' in state) {
    return `window ${state.windowIndex}: previous ${state.storedPrevious}, current ${state.storedCurrent}; now previous ${state.previous} x ${state.weight} + current ${state.current} = ${state.estimate} of ${policy.limit}`;
  }
  if ('tatMs' in state) {
    const unit = policy.algorithm === 'tokenBucket' ? 'tokens' : 'units';
    const full = state.aheadMs > 0 ? `full again in ${formatDuration(state.aheadMs)}` : 'full';
    return `TAT ${time(state.tatMs)} (${formatNumber(state.tatMs, 3)} ms): ${state.used} ${unit} in use, ${state.available} of ${policy.limit} available, ${full}`;
  }
  const range =
    state.oldestMs === null || state.newestMs === null
      ? ''
      : `, oldest ${time(state.oldestMs)}, newest ${time(state.newestMs)}`;
  return `${state.entries} entries, ${state.inWindow} inside the window${range}`;
}

function text(
  report: {
    limiter: string;
    policy: string;
    key: string;
    type: string;
    raw: unknown;
    state: StateView | null;
    ttlMs: number | null;
    next: Decision & { cost: number };
  },
  policy: Policy,
): string {
  const { next } = report;
  const verdict = next.allowed
    ? `allowed, ${next.remaining} remaining after it`
    : `denied, retry after ${formatDuration(next.retryAfterMs)} (${next.retryAfterMs} ms)`;
  const lines = [`limiter  ${report.limiter}: ${report.policy}`, `key      ${report.key}`];
  if (report.state === null) {
    lines.push('state    none: a fresh identifier with a full allowance');
  } else {
    const raw =
      typeof report.raw === 'string'
        ? JSON.stringify(report.raw)
        : `${(report.raw as unknown[] | null)?.length ?? 0} entries`;
    lines.push(`stored   ${report.type} ${raw}`);
    lines.push(`state    ${describe(report.state, policy)}`);
    lines.push(
      `TTL      ${report.ttlMs === null ? 'none (this key never expires: run sluice audit)' : `${formatDuration(report.ttlMs)} (${report.ttlMs} ms)`}`,
    );
  }
  lines.push(
    `next     cost ${next.cost}: ${verdict}; limit ${next.limit}, reset in ${formatDuration(next.resetMs)} (from limiter.peek: nothing consumed)`,
  );
  return lines.join('\n');
}

/** `sluice inspect`. */
export const inspect: Command = { ...spec, run };
