// `sluice audit`: walks the keyspace with SCAN and reports limiter keys that would never reset.
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
  type Values,
} from './args.js';
import { TTL_SLACK_FACTOR } from './audit-judge.js';
import { type AuditReport, auditJsonReport, auditTextReport, OTHER } from './audit-report.js';
import { type ScanOptions, scanKeyspace } from './audit-scan.js';
import type { Command, Context } from './command.js';
import { findConfig, NO_CONFIG } from './config.js';
import { CliError, EXIT } from './errors.js';
import { connect, redisUrl } from './redis.js';

const MAX_SHOWN_DEFAULT = 20;

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
    'max-keys': { type: 'string' },
    show: { type: 'string' },
  },
  help: `Usage: sluice audit [--redis URL] [--config file] [--match 'rl:*'] [--fix --ttl 1h] [--rate 50000]

Walks the keyspace with SCAN (never KEYS), on a cluster every primary, and reports limiter keys
  - without an expiry (they never reset: the customer stays blocked),
  - with a TTL far beyond what their policy ever sets (more than ${TTL_SLACK_FACTOR}x),
  - of an unexpected type (a hash where a counter should be, ...),
grouped by limiter (<prefix>:<name>:{<identifier>}), each with the primary that holds it. Keys
named otherwise that match are listed under "${OTHER}" and checked for an expiry only.

TTLs are judged only against the policies of your config file: without one, audit reports keys
without an expiry and of a type no limiter writes, says that TTLs were not judged, and refuses
--fix, since a policy it guessed could cut a customer's TTL short.

Options:
  --match <pattern>   SCAN pattern (default: '<prefix>:*')
  --fix               give keys without an expiry a TTL (PEXPIRE ... NX), and cut TTLs beyond their
                      policy to the policy's longest (PEXPIRE ... LT). Types are only reported.
                      Needs a config file.
  --ttl <time>        the TTL --fix gives keys without one, e.g. 1h (required with --fix); for a
                      limiter in the config, at most its policy's longest TTL
  --count <n>         keys per SCAN call (default 1000)
  --rate <n>          at most n keys per second on each primary, to stay gentle on a busy server
                      (default: no limit)
  --max-keys <n>      stop after n keys (default: no limit)
  --show <n>          list at most n keys per limiter in the text report (default ${MAX_SHOWN_DEFAULT})
${CONNECTION_FLAGS_HELP}
${CONFIG_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 nothing found, 1 keys found (also when --fix repaired them), 2 could not run, 130 interrupted.
A progress bar with keys per second is drawn on stderr when it is a terminal; plain lines otherwise.`,
} as const;

interface AuditOptions extends ScanOptions {
  readonly configPath: string | undefined;
  readonly redis: string;
  readonly timeoutMs: number;
}

/** Reads and checks the flags and the config; every refusal happens here, before connecting. */
function parse(values: Values): AuditOptions {
  const config = findConfig(stringFlag(values, 'config'));
  const prefix = stringFlag(values, 'prefix') ?? config?.prefix ?? 'rl';
  const fix = values.fix === true;
  const ttlFlag = stringFlag(values, 'ttl');
  if (fix && config === undefined) {
    throw new CliError(
      `\`--fix\` needs your policies, and ${NO_CONFIG}: without them a TTL cannot be judged, and a guessed policy could cut a customer's TTL short. Nothing was changed. Pass --config <file> with your application's policies (a file with "policies": {} gives keys without an expiry the --ttl and changes nothing else).`,
    );
  }
  if (fix && ttlFlag === undefined) {
    throw new CliError(
      '`--fix` needs `--ttl`, the expiry to give keys that have none (for example --ttl 1h).',
    );
  }
  if (!fix && ttlFlag !== undefined) throw new CliError('`--ttl` only applies with `--fix`.');
  return {
    configPath: config?.path,
    policies: config?.policies ?? new Map(),
    prefix,
    match: stringFlag(values, 'match') ?? `${prefix}:*`,
    fixTtlMs: ttlFlag === undefined ? undefined : parseDuration('ttl', ttlFlag),
    count: optional(values, 'count', (f, t) => parsePositiveInteger(f, t, 1_000_000), 1000),
    rate: optional(values, 'rate', parsePositiveInteger, 0),
    maxKeys: optional(values, 'max-keys', parsePositiveInteger, 0),
    show: optional(values, 'show', parsePositiveInteger, MAX_SHOWN_DEFAULT),
    redis: redisUrl(stringFlag(values, 'redis')),
    timeoutMs: optional(values, 'timeout', parseDuration, 5000),
  };
}

async function run(context: Context): Promise<number> {
  const options = parse(context.values);
  const connection = await connect(options.redis, options.timeoutMs);
  let result: Awaited<ReturnType<typeof scanKeyspace>>;
  try {
    result = await scanKeyspace(connection, options, context.signal);
  } finally {
    await connection.close();
  }
  const report: AuditReport = {
    ...result,
    connection,
    match: options.match,
    prefix: options.prefix,
    configPath: options.configPath,
    maxKeys: options.maxKeys,
    fix: options.fixTtlMs !== undefined,
    show: options.show,
  };
  context.out(context.json ? auditJsonReport(report) : auditTextReport(report));
  if (result.ended === 'interrupted') return EXIT.INTERRUPTED;
  return result.findings.length > 0 ? EXIT.FOUND : EXIT.OK;
}

/** `sluice audit`. */
export const audit: Command = { ...spec, run };
