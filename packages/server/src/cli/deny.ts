// `sluice deny add|list|remove`: an identifier denied in Redis for a while, refused by every process's next decision.

import type { Denial } from 'sluice';
import { DEFAULT_DENY_MS } from 'sluice/internal';
import { COMMON_FLAGS_HELP, CONNECTION_FLAGS_HELP } from './args.js';
import type { Command, Context } from './command.js';
import { formatDuration, table } from './output.js';
import {
  forFlag,
  runStored,
  STORED_FLAGS,
  STORED_FLAGS_HELP,
  type StoredDone,
  type StoredTarget,
  whoText,
} from './stored-command.js';

const spec = {
  name: 'deny',
  summary:
    'deny an identifier for a while (add, list, remove): every process refuses it at its next decision',
  actions: {
    add: ['policy', 'identifier'],
    list: ['policy'],
    remove: ['policy', 'identifier'],
  },
  flags: STORED_FLAGS,
  help: `Usage: sluice deny add <policy> <identifier> [--for <time>] [--tag <tag>]
       sluice deny list <policy>
       sluice deny remove <policy> <identifier> [--tag <tag>]

Denies one identifier of a policy: the next decision of every limiter of that name made with
overrides: true (and of \`sluice serve\` for a policy with "overrides": true) refuses it without
looking at its quota (reason "denied"; HTTP middlewares answer 403), until the denial ends by
itself after --for, or \`remove\` ends it. A denial always ends: keep permanent ones in your code
(the middlewares' deny option), where they are reviewed.

Options:
  --for <time>        how long (a duration: 30s, 15m, 1h, 7d; default 1h)
${STORED_FLAGS_HELP}
${CONNECTION_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 done (also when there was nothing to remove), 2 could not run.`,
} as const;

/** What an action was asked, parsed before anything is connected. */
interface Asked {
  readonly action: 'add' | 'list' | 'remove';
  readonly policy: string;
  readonly identifier: string;
  readonly forMs: number;
}

function parse(context: Context): Asked {
  const [action, policy, identifier = ''] = context.positionals as [Asked['action'], string, string?];
  return { action, policy, identifier, forMs: forFlag(context) ?? DEFAULT_DENY_MS };
}

function denialRows(denials: readonly Denial[]): string {
  if (denials.length === 0) return 'No identifier is denied.';
  // Quoted, as the other messages name them: an address reads as text, a space is seen.
  const rows = denials.map((entry) => [
    JSON.stringify(entry.identifier),
    entry.tag === undefined ? '(none)' : JSON.stringify(entry.tag),
    formatDuration(entry.expiresInMs),
  ]);
  return table([['identifier', 'tag', 'ends in'], ...rows]);
}

async function execute(asked: Asked, target: StoredTarget): Promise<StoredDone> {
  const { action, policy, identifier, forMs } = asked;
  const { limiter, tag } = target;
  const options = tag === undefined ? {} : { tag };
  const who = whoText(identifier, tag);
  if (action === 'list') {
    const denials = await limiter.listDenials();
    const json = denials.map((entry) => ({ ...entry, tag: entry.tag ?? null }));
    return { json: { policy, denials: json }, text: denialRows(denials) };
  }
  if (action === 'remove') {
    const removed = await limiter.undeny(identifier, options);
    const text = removed ? `${who} is no longer denied.` : `Nothing to remove: ${who} is not denied.`;
    return { json: { policy, identifier, tag: tag ?? null, removed }, text };
  }
  await limiter.deny(identifier, { ...options, forMs });
  return {
    json: { policy, identifier, tag: tag ?? null, forMs },
    text: `Denied ${who} for ${formatDuration(forMs)}: the next decision on every process refuses it; the denial then ends by itself.`,
  };
}

function run(context: Context): Promise<number> {
  return runStored(context, parse(context), 'add', execute);
}

/** `sluice deny`. */
export const deny: Command = { ...spec, run };
