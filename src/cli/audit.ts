// `sluice audit`: walks the keyspace with SCAN and reports limiter keys that would never reset.
import type { Redis } from 'ioredis';
import type { Policy } from '../index.js';
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
  stringFlag,
} from './args.js';
import {
  type Finding,
  type Group,
  OTHER,
  PROBLEMS,
  type Problem,
  perSecond,
  textReport,
} from './audit-report.js';
import { type Command, type Context, sleep } from './command.js';
import { loadConfig, maxTtlMs, stateType } from './config.js';
import { CliError, EXIT } from './errors.js';
import { formatNumber, Progress } from './output.js';
import { connect, redisUrl } from './redis.js';

/**
 * A TTL counts as "far beyond" its policy above twice the longest the policy sets: the scripts never
 * set more than the longest, and the slack keeps a recent policy change from raising an alarm.
 */
const TTL_SLACK_FACTOR = 2;

const MAX_SHOWN_DEFAULT = 20;

/** The limiter name in `<prefix>:<name>:{<identifier>}` (or `...:{<tag>}:<identifier>`), if the key has that shape. */
export function limiterOf(key: string, prefix: string): string | undefined {
  if (!key.startsWith(`${prefix}:`)) return undefined;
  const rest = key.slice(prefix.length + 1);
  const at = rest.indexOf(':{');
  if (at < 1) return undefined;
  const name = rest.slice(0, at);
  return /[{}]/.test(name) ? undefined : name;
}

/**
 * How far a SCAN has come, from its cursor. Redis walks its hash table in reverse-binary order of
 * bucket indexes, so the cursor's bits reversed over 64 bits give the share of buckets already
 * visited, whatever the table size. Only drives the progress bar.
 */
export function scanFraction(cursor: string): number {
  let value = BigInt(cursor);
  let reversed = 0n;
  for (let i = 0; i < 64; i++) {
    reversed = (reversed << 1n) | (value & 1n);
    value >>= 1n;
  }
  return Number(reversed) / 2 ** 64;
}

const spec = {
  name: 'audit',
  summary: 'find limiter keys with no expiry, a TTL far beyond their policy, or the wrong type',
  flags: {
    ...COMMON_FLAGS,
    ...CONNECTION_FLAGS,
    ...CONFIG_FLAGS,
    match: { type: 'string' },
    fix: { type: 'boolean' },
    ttl: { type: 'string' },
    count: { type: 'string' },
    rate: { type: 'string' },
    show: { type: 'string' },
  },
  help: `Usage: sluice audit [--redis URL] [--match 'rl:*'] [--fix --ttl 1h] [--count 1000] [--rate 50000]

Walks the keyspace with SCAN (never KEYS), on a cluster every primary, and reports limiter keys
  - without an expiry (they never reset: the customer stays blocked),
  - with a TTL far beyond what their policy ever sets (more than ${TTL_SLACK_FACTOR}x; needs the policy in the config),
  - of an unexpected type (a hash where a counter should be, ...),
grouped by limiter (<prefix>:<name>:{<identifier>}). Keys named otherwise that match are listed
under "${OTHER}" and checked for an expiry only.

Options:
  --match <pattern>   SCAN pattern (default: '<prefix>:*')
  --fix               give keys without an expiry a TTL (PEXPIRE ... NX), and cut TTLs beyond their
                      policy to the policy's longest (PEXPIRE ... LT). Types are only reported.
  --ttl <time>        the TTL --fix gives keys without one, e.g. 1h (required with --fix); for a
                      limiter in the config, at most its policy's longest TTL
  --count <n>         keys per SCAN call (default 1000)
  --rate <n>          walk at most n keys per second, to stay gentle on a busy server (default: no limit)
  --show <n>          list at most n keys per limiter in the text report (default ${MAX_SHOWN_DEFAULT})
${CONNECTION_FLAGS_HELP}
${CONFIG_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 nothing found, 1 keys found (also when --fix repaired them), 2 could not run, 130 interrupted.
A progress bar with keys per second is drawn on stderr when it is a terminal; plain lines otherwise.`,
} as const;

async function run(context: Context): Promise<number> {
  const { values, signal } = context;
  const config = loadConfig(stringFlag(values, 'config'));
  const prefix = stringFlag(values, 'prefix') ?? config.prefix;
  const match = stringFlag(values, 'match') ?? `${prefix}:*`;
  const fix = values.fix === true;
  const ttlFlag = stringFlag(values, 'ttl');
  if (fix && ttlFlag === undefined) {
    throw new CliError(
      '`--fix` needs `--ttl`, the expiry to give keys that have none (for example --ttl 1h).',
    );
  }
  if (!fix && ttlFlag !== undefined) throw new CliError('`--ttl` only applies with `--fix`.');
  const fixTtlMs = ttlFlag === undefined ? 0 : parseDuration('ttl', ttlFlag);
  const count = optional(values, 'count', (f, t) => parsePositiveInteger(f, t, 1_000_000), 1000);
  const rate = optional(values, 'rate', parsePositiveInteger, 0);
  const show = optional(values, 'show', parsePositiveInteger, MAX_SHOWN_DEFAULT);
  const timeoutMs = optional(values, 'timeout', parseDuration, 5000);

  const connection = await connect(redisUrl(stringFlag(values, 'redis')), timeoutMs);
  const groups = new Map<string, Group>();
  const flagged = new Set<string>();
  const findings: Finding[] = [];
  const progress = new Progress();
  const started = Date.now();
  let scanned = 0;
  let walked = 0;
  let complete = true;
  const groupOf = (name: string): Group => {
    let group = groups.get(name);
    if (group === undefined) {
      group = {
        name,
        policy: config.policies.get(name),
        keys: 0,
        noExpiry: 0,
        ttlTooLong: 0,
        unexpectedType: 0,
        fixed: 0,
        shown: { 'no-expiry': [], 'unexpected-type': [], 'ttl-too-long': [] },
      };
      groups.set(name, group);
    }
    return group;
  };
  try {
    const primaries = connection.primaries;
    for (let n = 0; n < primaries.length && !signal.aborted; n++) {
      const node = primaries[n] as Redis;
      let cursor = '0';
      do {
        const [next, keys] = (await node.scan(cursor, 'MATCH', match, 'COUNT', count)) as [string, string[]];
        cursor = next;
        walked += count;
        if (keys.length > 0) {
          const checked = await inspectKeys(node, keys);
          const fixes: Array<{ finding: Finding; args: Array<string | number> }> = [];
          for (let i = 0; i < keys.length; i++) {
            const key = keys[i] as string;
            const { type, ttlMs } = checked[i] as { type: string; ttlMs: number };
            // Gone between SCAN and the check: expired, as it should.
            if (type === 'none' || ttlMs === -2) continue;
            scanned++;
            const name = limiterOf(key, prefix);
            const group = groupOf(name ?? OTHER);
            group.keys++;
            const finding = judge(key, name, group.policy, type, ttlMs);
            if (finding === undefined || flagged.has(key)) continue;
            // SCAN may return a key twice (while the table grows); count it once.
            flagged.add(key);
            findings.push(finding);
            if (finding.problems.includes('no-expiry')) group.noExpiry++;
            if (finding.problems.includes('ttl-too-long')) group.ttlTooLong++;
            if (finding.problems.includes('unexpected-type')) group.unexpectedType++;
            const listed = group.shown[PROBLEMS.find((p) => finding.problems.includes(p)) as Problem];
            if (listed.length < show) listed.push(finding);
            if (fix && finding.problems.includes('no-expiry')) {
              // Never longer than the policy needs: a longer TTL would be the next run's finding.
              const ttl = finding.maxTtlMs === undefined ? fixTtlMs : Math.min(fixTtlMs, finding.maxTtlMs);
              fixes.push({ finding, args: [key, ttl, 'NX'] });
            } else if (fix && finding.problems.includes('ttl-too-long') && finding.maxTtlMs !== undefined) {
              fixes.push({ finding, args: [key, finding.maxTtlMs, 'LT'] });
            }
          }
          if (fixes.length > 0) await applyFixes(node, fixes, (name) => groupOf(name));
        }
        const fraction = (n + (cursor === '0' ? 1 : scanFraction(cursor))) / primaries.length;
        const elapsedMs = Date.now() - started;
        progress.update(
          fraction,
          `audit: ${formatNumber(scanned)} keys scanned (${formatNumber(perSecond(scanned, elapsedMs))} keys/s), ${formatNumber(findings.length)} found`,
        );
        if (rate > 0) {
          // Space the calls so that the keys walked stay under --rate per second.
          const aheadMs = (walked / rate) * 1000 - elapsedMs;
          if (aheadMs > 0) await sleep(aheadMs, signal);
        }
      } while (cursor !== '0' && !signal.aborted);
    }
    if (signal.aborted) complete = false;
  } finally {
    progress.done();
    await connection.close();
  }
  const elapsedMs = Date.now() - started;
  const ordered = [...groups.values()].sort((a, b) =>
    a.name === OTHER ? 1 : b.name === OTHER ? -1 : a.name.localeCompare(b.name),
  );
  const fixed = ordered.reduce((sum, group) => sum + group.fixed, 0);
  if (context.json) {
    context.out(
      JSON.stringify(
        {
          server: connection.server,
          redis: connection.label,
          match,
          prefix,
          complete,
          scanned,
          elapsedMs,
          found: findings.length,
          fixed,
          limiters: ordered.map((group) => ({
            name: group.name,
            policy: group.policy?.description ?? null,
            expectedType: group.policy === undefined ? null : stateType(group.policy),
            maxTtlMs: group.policy === undefined ? null : maxTtlMs(group.policy),
            keys: group.keys,
            noExpiry: group.noExpiry,
            ttlTooLong: group.ttlTooLong,
            unexpectedType: group.unexpectedType,
            fixed: group.fixed,
          })),
          findings,
        },
        null,
        2,
      ),
    );
  } else {
    context.out(
      textReport({ connection, match, scanned, elapsedMs, complete, ordered, findings, fix, fixed, show }),
    );
  }
  if (!complete) return EXIT.INTERRUPTED;
  return findings.length > 0 ? EXIT.FOUND : EXIT.OK;
}

/** TYPE and PTTL of each key, in one round trip. */
async function inspectKeys(
  node: Redis,
  keys: readonly string[],
): Promise<Array<{ type: string; ttlMs: number }>> {
  const pipeline = node.pipeline();
  for (const key of keys) pipeline.type(key).pttl(key);
  const replies = (await pipeline.exec()) ?? [];
  return keys.map((_, i) => {
    const [typeError, type] = replies[2 * i] ?? [null, 'none'];
    const [ttlError, ttl] = replies[2 * i + 1] ?? [null, -2];
    if (typeError !== null || ttlError !== null) throw typeError ?? ttlError;
    return { type: String(type), ttlMs: Number(ttl) };
  });
}

function judge(
  key: string,
  name: string | undefined,
  policy: Policy | undefined,
  type: string,
  ttlMs: number,
): Finding | undefined {
  const problems: Problem[] = [];
  let expectedType: string | undefined;
  if (name !== undefined) {
    expectedType = policy === undefined ? 'string or zset' : stateType(policy);
    const ok = policy === undefined ? type === 'string' || type === 'zset' : type === expectedType;
    if (!ok) problems.push('unexpected-type');
  }
  const longest = policy === undefined ? undefined : maxTtlMs(policy);
  if (ttlMs === -1) problems.push('no-expiry');
  else if (longest !== undefined && ttlMs > longest * TTL_SLACK_FACTOR) problems.push('ttl-too-long');
  if (problems.length === 0) return undefined;
  return { key, limiter: name ?? OTHER, problems, type, ttlMs, expectedType, maxTtlMs: longest };
}

async function applyFixes(
  node: Redis,
  fixes: ReadonlyArray<{ finding: Finding; args: Array<string | number> }>,
  groupOf: (name: string) => Group,
): Promise<void> {
  const pipeline = node.pipeline();
  for (const { args } of fixes) pipeline.call('PEXPIRE', ...args);
  const replies = (await pipeline.exec()) ?? [];
  fixes.forEach(({ finding, args }, i) => {
    const [error, reply] = replies[i] ?? [null, 0];
    if (error !== null) {
      throw new CliError(
        `PEXPIRE ${finding.key} ${args.slice(1).join(' ')} failed: ${error.message} (the NX and LT options need Redis 7.0 or later).`,
      );
    }
    if (reply === 1) {
      finding.fixedTtlMs = Number(args[1]);
      groupOf(finding.limiter).fixed++;
    }
  });
}

/** `sluice audit`. */
export const audit: Command = { ...spec, run };
