// A child process for the concurrency tests: connects once, then for each round builds a limiter,
// waits for "go", fires `parallel` requests at once on one identifier, and reports how many passed.
import {
  createLimiter,
  fixedWindow,
  gcra,
  type Policy,
  RedisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { type ClientKind, type Connected, connect } from './clients.js';

export interface FireConfig {
  readonly mode: 'scripts' | 'functions';
  readonly maxBatch: number;
  /** A sluice policy, or a naive limiter that shows the race the scripts prevent. */
  readonly limiter: 'fixedWindow' | 'slidingLog' | 'slidingWindow' | 'tokenBucket' | 'gcra' | 'naive';
  readonly limit: number;
  readonly name: string;
  readonly identifier: string;
  readonly parallel: number;
}

export function policyFor(config: Pick<FireConfig, 'limiter' | 'limit'>): Policy {
  const limit = config.limit;
  switch (config.limiter) {
    case 'fixedWindow':
      return fixedWindow({ limit, windowMs: 3_600_000 });
    case 'slidingLog':
      return slidingLog({ limit, windowMs: 60_000 });
    case 'slidingWindow':
      return slidingWindow({ limit, windowMs: 3_600_000 });
    case 'tokenBucket':
      return tokenBucket({ capacity: limit, refillPerSecond: 0.001 });
    case 'gcra':
      return gcra({ limit, periodMs: 3_600_000 });
    default:
      throw new Error(`no policy for ${config.limiter}`);
  }
}

type Message = { type: 'prepare'; config: FireConfig } | { type: 'go' } | { type: 'exit' };

/** Serves rounds until told to exit: prepare (build the limiter) -> ready; go (fire) -> allowed. */
async function main(): Promise<void> {
  const port = Number(process.argv[2]);
  const kind = process.argv[3] as ClientKind;
  const connected = await connect(kind, port);
  let fire: () => Promise<boolean> = async () => false;
  let parallel = 0;
  process.on('message', async (message: Message) => {
    if (message.type === 'prepare') {
      fire = prepare(message.config, connected);
      parallel = message.config.parallel;
      process.send?.({ ready: true });
    } else if (message.type === 'go') {
      const results = await Promise.all(Array.from({ length: parallel }, () => fire()));
      process.send?.({ allowed: results.filter(Boolean).length });
    } else {
      await connected.close();
      process.disconnect?.();
    }
  });
  process.send?.({ started: true });
}

function prepare(config: FireConfig, connected: Connected): () => Promise<boolean> {
  if (config.limiter === 'naive') {
    // The race: read, decide, then write, in separate commands.
    const key = `naive:${config.name}:${config.identifier}`;
    return async () => {
      const count = Number((await connected.command('GET', key)) ?? 0);
      if (count >= config.limit) return false;
      await connected.command('INCR', key);
      await connected.command('PEXPIRE', key, 60_000);
      return true;
    };
  }
  const store = new RedisStore({ client: connected.client, mode: config.mode, maxBatch: config.maxBatch });
  // A busy machine must not turn a slow reply into a timeout decision: the allowed count is the point.
  const limiter = createLimiter({ store, policy: policyFor(config), name: config.name, timeoutMs: 60_000 });
  return async () => (await limiter.limit(config.identifier)).allowed;
}

void main();
