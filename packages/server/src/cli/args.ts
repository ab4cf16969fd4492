// Argument parsing for every command: node:util parseArgs, value checks whose messages name the flag.
import { parseArgs } from 'node:util';
import { CliError } from './errors.js';
import { closest } from './suggest.js';

/** One flag: a string that takes a value, or a boolean switch. */
export interface FlagSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
}

/** What a command declares about its arguments, and the help printed by `--help`. */
export interface CommandSpec {
  readonly name: string;
  /** One line for `sluice --help`. */
  readonly summary: string;
  /** The whole `--help` text. */
  readonly help: string;
  readonly flags: Readonly<Record<string, FlagSpec>>;
  /** Names of the positional arguments, all required. */
  readonly positionals?: readonly string[];
  /**
   * For a command with actions (`sluice limits set ...`): each action's name and its positional
   * arguments, all required. The first positional names the action.
   */
  readonly actions?: Readonly<Record<string, readonly string[]>>;
}

export type Values = Readonly<Record<string, string | boolean | undefined>>;

export interface Parsed {
  readonly values: Values;
  readonly positionals: readonly string[];
}

/** Flags every command accepts. */
export const COMMON_FLAGS = {
  help: { type: 'boolean', short: 'h' },
  json: { type: 'boolean' },
  verbose: { type: 'boolean' },
} as const satisfies Record<string, FlagSpec>;

/** Flags of the commands that talk to Redis. */
export const CONNECTION_FLAGS = {
  redis: { type: 'string' },
  timeout: { type: 'string' },
} as const satisfies Record<string, FlagSpec>;

/** Flags of the commands that read the policies file. */
export const CONFIG_FLAGS = {
  config: { type: 'string' },
  prefix: { type: 'string' },
} as const satisfies Record<string, FlagSpec>;

export const CONNECTION_FLAGS_HELP = `  --redis <url>       host:port, redis://[user:password@]host:port[/db] or rediss://... (default:
                      $SLUICE_REDIS_URL, then 127.0.0.1:6379). A cluster is detected and every
                      primary is used.
  --timeout <time>    how long to wait for the server to answer at connection (default 5s)`;

export const CONFIG_FLAGS_HELP = `  --config <file>     the policies file (default: $SLUICE_CONFIG, then ./sluice.config.json if present)
  --prefix <prefix>   the key prefix of your RedisStore (default: the config file's, then "rl")`;

export const COMMON_FLAGS_HELP = `  --json              print one JSON document on stdout instead of text
  --verbose           print stacks of unexpected errors
  -h, --help          this help`;

/** Parses a command's arguments; unknown flags and missing values become one-line errors. */
export function parseCommand(spec: CommandSpec, argv: readonly string[]): Parsed {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { ...spec.flags },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    // parseArgs explains itself well, at length: keep its first sentence.
    const text = error instanceof Error ? (error.message.split(/\.\s/)[0] ?? error.message) : String(error);
    throw new CliError(
      `${text.replace(/\.$/, '')}${didYouMean(spec, text)} (see \`sluice ${spec.name} --help\`).`,
    );
  }
  const values = parsed.values as Values;
  if (values.help === true) return { values, positionals: parsed.positionals };
  const wanted =
    spec.actions === undefined ? (spec.positionals ?? []) : actionPositionals(spec, parsed.positionals[0]);
  if (parsed.positionals.length !== wanted.length) {
    const expected = wanted.length === 0 ? 'no arguments' : wanted.map((name) => `<${name}>`).join(' ');
    throw new CliError(
      `Expected ${expected}, got ${parsed.positionals.length === 0 ? 'none' : parsed.positionals.map((p) => JSON.stringify(p)).join(' ')} (see \`sluice ${spec.name} --help\`).`,
    );
  }
  return { values, positionals: parsed.positionals };
}

/** The positionals of the action a command's first positional names, that name first. */
function actionPositionals(spec: CommandSpec, action: string | undefined): readonly string[] {
  const actions = spec.actions ?? {};
  const names = Object.keys(actions);
  const wanted = action === undefined ? undefined : actions[action];
  if (wanted === undefined) {
    const guess = action === undefined ? undefined : closest(action, names);
    const asked = action === undefined ? 'No action' : `Unknown action ${JSON.stringify(action)}`;
    const hint = guess === undefined ? '' : ` (did you mean ${guess}?)`;
    throw new CliError(
      `${asked}${hint}; expected one of ${names.join(', ')} (see \`sluice ${spec.name} --help\`).`,
    );
  }
  return [action as string, ...wanted];
}

/** `; did you mean --rate?` for an unknown option close to one of the command's, else nothing. */
function didYouMean(spec: CommandSpec, message: string): string {
  const unknown = /^Unknown option '--?([^'=]+)/.exec(message)?.[1];
  if (unknown === undefined) return '';
  const guess = closest(unknown, Object.keys(spec.flags));
  return guess === undefined ? '' : `; did you mean --${guess}?`;
}

/** The string value of a flag, or undefined when absent. */
export function stringFlag(values: Values, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration with its unit (`500ms`, `30s`, `5m`, `1h`, `2d`), in whole milliseconds. A bare number
 * is refused: Redis speaks seconds (EXPIRE) and milliseconds (PEXPIRE), and a guess would be wrong
 * for someone.
 */
export function parseDuration(flag: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim());
  const ms =
    match === null ? Number.NaN : Math.round(Number(match[1]) * (UNITS[match[2] as string] as number));
  if (!Number.isSafeInteger(ms) || ms < 1) {
    const bare =
      /^\d+(\.\d+)?$/.test(text.trim()) && Number(text) > 0
        ? `: a number needs its unit, ${text.trim()}s for seconds or ${text.trim()}ms for milliseconds (Redis counts EXPIRE in seconds and PEXPIRE in milliseconds, so a guess would be wrong for someone)`
        : '';
    throw new CliError(
      `Expected \`--${flag}\` to be a duration such as 500ms, 30s, 5m, 1h or 2d, got ${JSON.stringify(text)}${bare}.`,
    );
  }
  return ms;
}

/** A positive integer flag, at most `max`. */
export function parsePositiveInteger(flag: string, text: string, max = Number.MAX_SAFE_INTEGER): number {
  const value = /^\d+$/.test(text.trim()) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1 || value > max) {
    throw new CliError(
      `Expected \`--${flag}\` to be a whole number from 1 to ${max.toLocaleString('en-US')}, got ${JSON.stringify(text)}.`,
    );
  }
  return value;
}

/** A positive number flag (fractions allowed). */
export function parsePositiveNumber(flag: string, text: string): number {
  const value = /^\d+(\.\d+)?$/.test(text.trim()) ? Number(text) : Number.NaN;
  if (!Number.isFinite(value) || value <= 0) {
    throw new CliError(`Expected \`--${flag}\` to be a number greater than 0, got ${JSON.stringify(text)}.`);
  }
  return value;
}

/** An optional flag run through `parse`, or `fallback` when absent. */
export function optional<T>(
  values: Values,
  flag: string,
  parse: (flag: string, text: string) => T,
  fallback: T,
): T {
  const text = stringFlag(values, flag);
  return text === undefined ? fallback : parse(flag, text);
}
