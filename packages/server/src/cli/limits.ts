// `sluice limits set|get|list|clear`: an identifier's limit stored in Redis, which every process's next decision reads.
import type { StoredLimit } from 'sluice';
import { COMMON_FLAGS_HELP, CONNECTION_FLAGS_HELP, parsePositiveInteger } from './args.js';
import type { Command, Context } from './command.js';
import { formatDuration, formatNumber, table } from './output.js';
import {
  forFlag,
  keptText,
  runStored,
  STORED_FLAGS,
  STORED_FLAGS_HELP,
  type StoredDone,
  type StoredTarget,
  whoText,
} from './stored-command.js';

const spec = {
  name: 'limits',
  summary: "store an identifier's own limit (set, get, list, clear), read by every process's next decision",
  actions: {
    set: ['policy', 'identifier', 'limit'],
    get: ['policy', 'identifier'],
    list: ['policy'],
    clear: ['policy', 'identifier'],
  },
  flags: STORED_FLAGS,
  help: `Usage: sluice limits set <policy> <identifier> <limit> [--for <time>] [--tag <tag>]
       sluice limits get <policy> <identifier> [--tag <tag>]
       sluice limits list <policy>
       sluice limits clear <policy> <identifier> [--tag <tag>]

Stores a limit for one identifier of a policy (a customer's plan, an abuser's reduced quota). The
next decision of every limiter of that name made with overrides: true (and of \`sluice serve\` for a
policy with "overrides": true) uses it instead of the policy's own, scaled as a call's own limit is;
a call that gives its own limit still wins. Nothing restarts. \`clear\` returns to the policy's.

The limit is checked against the policy (from the config, or --algorithm) before it is written. It
is kept until cleared, or for --for (a duration: 30s, 15m, 1h, 7d).

Options:
  --for <time>        keep the limit this long (default: until cleared)
${STORED_FLAGS_HELP}
${CONNECTION_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 done (also when there was nothing to clear), 2 could not run.`,
} as const;

/** What an action was asked, parsed before anything is connected. */
interface Asked {
  readonly action: 'set' | 'get' | 'list' | 'clear';
  readonly policy: string;
  readonly identifier: string;
  readonly limit: number;
  readonly ttlMs: number | undefined;
}

function parse(context: Context): Asked {
  const [action, policy, identifier = '', limitText] = context.positionals as [
    Asked['action'],
    string,
    string?,
    string?,
  ];
  const limit = action === 'set' ? parsePositiveInteger('limit', limitText ?? '') : 0;
  return { action, policy, identifier, limit, ttlMs: forFlag(context) };
}

function limitRows(limits: readonly StoredLimit[]): string {
  if (limits.length === 0) return 'No stored limits: every identifier has the policy’s own.';
  // Quoted, as the other messages name them: an address reads as text, a space is seen.
  const rows = limits.map((entry) => [
    JSON.stringify(entry.identifier),
    entry.tag === undefined ? '(none)' : JSON.stringify(entry.tag),
    formatNumber(entry.limit),
    entry.expiresInMs === undefined ? 'until cleared' : formatDuration(entry.expiresInMs),
  ]);
  return table([['identifier', 'tag', 'limit', 'kept'], ...rows]);
}

/** What an action found or did, as a JSON document and as text. */
async function execute(asked: Asked, target: StoredTarget): Promise<StoredDone> {
  const { action, policy, identifier } = asked;
  const { limiter, tag } = target;
  const options = tag === undefined ? {} : { tag };
  const who = whoText(identifier, tag);
  if (action === 'list') {
    const limits = await limiter.listLimits();
    const json = limits.map((entry) => ({
      ...entry,
      tag: entry.tag ?? null,
      expiresInMs: entry.expiresInMs ?? null,
    }));
    return { json: { policy, limits: json }, text: limitRows(limits) };
  }
  if (action === 'get') {
    const stored = await limiter.getLimit(identifier, options);
    const text =
      stored === undefined
        ? `${who} has no stored limit: the policy's own applies (${target.policy}).`
        : `${who} has a stored limit of ${formatNumber(stored.limit)}, kept ${keptText(stored.expiresInMs)}.`;
    const json =
      stored === undefined ? null : { limit: stored.limit, expiresInMs: stored.expiresInMs ?? null };
    return { json: { policy, identifier, tag: tag ?? null, stored: json }, text };
  }
  if (action === 'clear') {
    const cleared = await limiter.clearLimit(identifier, options);
    const text = cleared
      ? `Cleared the stored limit of ${who}: the next decision uses the policy's own.`
      : `Nothing to clear: ${who} has no stored limit.`;
    return { json: { policy, identifier, tag: tag ?? null, cleared }, text };
  }
  const { limit, ttlMs } = asked;
  const before = await limiter.getLimit(identifier, options);
  await limiter.setLimit(identifier, limit, ttlMs === undefined ? options : { ...options, ttlMs });
  const was = before === undefined ? '' : ` (was ${formatNumber(before.limit)})`;
  const kept = ttlMs === undefined ? 'until cleared' : `for ${formatDuration(ttlMs)}`;
  return {
    json: {
      policy,
      identifier,
      tag: tag ?? null,
      limit,
      ttlMs: ttlMs ?? null,
      previous: before?.limit ?? null,
    },
    text: `Stored a limit of ${formatNumber(limit)} for ${who}${was}, kept ${kept}: the next decision on every process uses it.`,
  };
}

function run(context: Context): Promise<number> {
  return runStored(context, parse(context), 'set', execute);
}

/** `sluice limits`. */
export const limits: Command = { ...spec, run };
