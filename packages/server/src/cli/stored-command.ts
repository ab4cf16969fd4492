// What `sluice limits` and `sluice deny` share: the policy's limiter on Redis, reading stored entries, and their flags.
import { createLimiter, type Limiter, type Policy, RedisStore, SluiceError } from 'sluice';
import {
  COMMON_FLAGS,
  CONFIG_FLAGS,
  CONNECTION_FLAGS,
  optional,
  parseDuration,
  stringFlag,
  type Values,
} from './args.js';
import type { Context } from './command.js';
import { type Config, findConfig, NO_CONFIG } from './config.js';
import { CliError, EXIT } from './errors.js';
import { POLICY_FLAGS, resolvePolicy } from './inspect.js';
import { formatDuration } from './output.js';
import { connect, redisUrl } from './redis.js';

/** Flags of both commands: the connection, the config (or the policy flags), `--for` and `--tag`. */
export const STORED_FLAGS = {
  ...COMMON_FLAGS,
  ...CONNECTION_FLAGS,
  ...CONFIG_FLAGS,
  ...POLICY_FLAGS,
  for: { type: 'string' },
  tag: { type: 'string' },
} as const;

export const STORED_FLAGS_HELP = `  --tag <tag>         the hash tag the identifier's calls are made with, if any
  --config <file>     the policies file (default: $SLUICE_CONFIG, then ./sluice.config.json if present);
                      --algorithm and its flags (see \`sluice inspect --help\`) give a policy instead
  --prefix <prefix>   the key prefix of your RedisStore (default: the config file's, then "rl")`;

/** What an action works on: the policy's limiter, the operator's identifier and tag, and a note for the text. */
export interface StoredTarget {
  readonly limiter: Limiter;
  readonly policy: string;
  readonly tag: string | undefined;
  /** Said after a change when the service would not read it: the config does not set `overrides`. */
  readonly note: string | undefined;
}

/** The `--for` duration in ms, if given. */
export function forFlag(context: Context): number | undefined {
  return optional(context.values, 'for', parseDuration, undefined as number | undefined);
}

/** A library error (a bad limit, identifier or tag) as the one line an operator reads. */
export function operatorError(error: unknown): unknown {
  if (error instanceof SluiceError && error.code !== 'ERR_SLUICE_STORE') {
    return new CliError(error.message.replace(/ See sluice\/docs\/errors\.md#\S+$/, ''), { cause: error });
  }
  return error;
}

/** The named policy, from the policy flags when given, else from the config, which must name it. */
function storedPolicy(values: Values, config: Config | undefined, name: string): Policy {
  if (stringFlag(values, 'algorithm') !== undefined) return resolvePolicy(values, config, name);
  if (config === undefined) {
    throw new CliError(
      `The policy of ${JSON.stringify(name)} is unknown: ${NO_CONFIG}. A limit is checked against its policy before anything is stored: pass --config <file> with your application's policies, or give the policy with --algorithm (see --help).`,
    );
  }
  const policy = config.policies.get(name);
  if (policy !== undefined) return policy;
  throw new CliError(
    `No policy named ${JSON.stringify(name)} in ${config.path}; its policies are ${[...config.policies.keys()].join(', ') || 'none'}.`,
  );
}

/**
 * Runs `work` on the named policy's limiter, made with `overrides: true` on the Redis of `--redis`,
 * and closes the connection after. The policy comes from the config (or the policy flags): a
 * limit is checked against it before anything is written.
 */
export async function withStoredTarget<T>(
  context: Context,
  name: string,
  work: (target: StoredTarget) => Promise<T>,
): Promise<T> {
  const { values } = context;
  const config = findConfig(stringFlag(values, 'config'));
  const policy = storedPolicy(values, config, name);
  const prefix = stringFlag(values, 'prefix') ?? config?.prefix ?? 'rl';
  const timeoutMs = optional(values, 'timeout', parseDuration, 5000);
  const note =
    config?.policies.has(name) === true && !config.overrides.has(name)
      ? `Note: ${config.path} does not set "overrides": true for ${name}, so \`sluice serve\` does not read it; applications read it when their limiter has overrides: true.`
      : undefined;
  const connection = await connect(redisUrl(stringFlag(values, 'redis')), timeoutMs);
  try {
    let limiter: Limiter;
    try {
      const store = new RedisStore({ client: connection.client, prefix });
      limiter = createLimiter({ store, policy, name, timeoutMs, overrides: true });
    } catch (error) {
      throw operatorError(error);
    }
    return await work({ limiter, policy: policy.description, tag: stringFlag(values, 'tag'), note });
  } catch (error) {
    throw operatorError(error);
  } finally {
    await connection.close();
  }
}

/** What an action of `sluice limits` or `sluice deny` was asked, parsed before anything is connected. */
export interface StoredAsked {
  readonly action: string;
  readonly policy: string;
}

/** What an action did: its JSON answer and its sentence. */
export interface StoredDone {
  readonly json: unknown;
  readonly text: string;
}

/**
 * Runs an action of `sluice limits` or `sluice deny` on the policy's limiter and prints what it did,
 * then the target's note (a policy `sluice serve` does not read) after the action that writes.
 */
export async function runStored<A extends StoredAsked>(
  context: Context,
  asked: A,
  writes: A['action'],
  execute: (asked: A, target: StoredTarget) => Promise<StoredDone>,
): Promise<number> {
  const { done, note } = await withStoredTarget(context, asked.policy, async (target) => ({
    done: await execute(asked, target),
    note: asked.action === writes ? target.note : undefined,
  }));
  context.out(context.json ? JSON.stringify(done.json, null, 2) : done.text);
  if (note !== undefined) context.err(note);
  return EXIT.OK;
}

/** How long an entry is kept: `for 59 min 58 s more`, or `until cleared`. */
export function keptText(expiresInMs: number | undefined): string {
  return expiresInMs === undefined ? 'until cleared' : `for ${formatDuration(expiresInMs)} more`;
}

/** `"acme"`, or `"u1" (tag "tenant-9")`. */
export function whoText(identifier: string, tag: string | undefined): string {
  return tag === undefined
    ? JSON.stringify(identifier)
    : `${JSON.stringify(identifier)} (tag ${JSON.stringify(tag)})`;
}
