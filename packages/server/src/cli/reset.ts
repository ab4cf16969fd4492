// `sluice reset <limiter> <identifier>`: deletes one identifier's state (as a successful login resets its failures).
import { createLimiter, fixedWindow, RedisStore, SluiceError } from 'sluice';
import {
  COMMON_FLAGS,
  COMMON_FLAGS_HELP,
  CONFIG_FLAGS,
  CONFIG_FLAGS_HELP,
  CONNECTION_FLAGS,
  CONNECTION_FLAGS_HELP,
  optional,
  parseDuration,
  stringFlag,
} from './args.js';
import type { Command, Context } from './command.js';
import { findConfig } from './config.js';
import { CliError, EXIT } from './errors.js';
import { connect, redisUrl } from './redis.js';

const spec = {
  name: 'reset',
  summary: "delete an identifier's state: its next request starts with a full allowance",
  positionals: ['limiter', 'identifier'],
  flags: { ...COMMON_FLAGS, ...CONNECTION_FLAGS, ...CONFIG_FLAGS },
  help: `Usage: sluice reset <limiter> <identifier> [--redis URL] [--prefix rl]

Deletes the key <prefix>:<limiter>:{<identifier>} through limiter.reset(), so the identifier's
next request starts with a full allowance, whatever the algorithm.

Options:
${CONNECTION_FLAGS_HELP}
${CONFIG_FLAGS_HELP}
${COMMON_FLAGS_HELP}

Exit codes: 0 done (also when there was nothing to delete), 2 could not run.`,
} as const;

async function run(context: Context): Promise<number> {
  const { values, positionals } = context;
  const [name, identifier] = positionals as [string, string];
  const config = findConfig(stringFlag(values, 'config'));
  const prefix = stringFlag(values, 'prefix') ?? config?.prefix ?? 'rl';
  const timeoutMs = optional(values, 'timeout', parseDuration, 5000);
  const connection = await connect(redisUrl(stringFlag(values, 'redis')), timeoutMs);
  try {
    const store = new RedisStore({ client: connection.client, prefix });
    // reset() deletes whatever the algorithm kept, so any policy will do when the config has none.
    const policy = config?.policies.get(name) ?? fixedWindow({ limit: 1, windowMs: 1000 });
    let limiter: ReturnType<typeof createLimiter>;
    try {
      limiter = createLimiter({ store, policy, name, timeoutMs });
    } catch (error) {
      if (error instanceof SluiceError)
        throw new CliError(error.message.replace('`name`', 'the limiter name'));
      throw error;
    }
    const key = store.keyFor(name, identifier);
    const existed = Number(await connection.client.exists(key)) === 1;
    try {
      await limiter.reset(identifier);
    } catch (error) {
      if (error instanceof SluiceError && error.code !== 'ERR_SLUICE_STORE')
        throw new CliError(error.message);
      throw error;
    }
    if (context.json)
      context.out(JSON.stringify({ limiter: name, identifier, key, deleted: existed }, null, 2));
    else if (existed)
      context.out(
        `Deleted ${key}: the next request of ${JSON.stringify(identifier)} starts with a full allowance.`,
      );
    else
      context.out(
        `Nothing to delete: ${key} holds no state (a fresh identifier already has a full allowance).`,
      );
    return EXIT.OK;
  } finally {
    await connection.close();
  }
}

/** `sluice reset`. */
export const reset: Command = { ...spec, run };
