// The transport floor on Redis: the batches sluice's RedisStore would send (the decisions of a tick,
// up to maxBatch keys per call, keys built the same way), each sent by the same client as one EVALSHA
// of a script that does nothing but return a reply of the same shape as sluice's for allowed
// requests: the reset the batch shares, then each key's remaining units.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { type Decision, fixedWindow } from '../src/index.js';
import { stateKey } from '../src/keys.js';
import { wireOf } from '../src/stores/redis/wire.js';
import { type Contender, LIMIT, WINDOW_MS } from './contenders.js';
import type { Decider } from './load.js';

export const REDIS_FLOOR = 'floor.redis.transport';

/** The reply of sluice's batch script when every key is allowed (see lua/single.lua), without deciding anything. */
export const TRIVIAL_SCRIPT = `local out = { ${WINDOW_MS} }
for i = 1, #KEYS do
  out[i + 1] = ${LIMIT - 1}
end
return out
`;

const TRIVIAL_SHA = createHash('sha1').update(TRIVIAL_SCRIPT).digest('hex');

interface Waiting {
  readonly key: string;
  readonly resolve: (decision: Decision) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * A decider that batches as RedisStore does (process.nextTick after the first decision of a tick;
 * calls of at most `maxBatch` keys; the arguments of a fixed window: count, keys, op, now, the two
 * parameters, the batch's one cost) and resolves each decision with the fields of its record.
 */
export function transportFloor(redis: Redis, maxBatch = 64): Decider<Decision> {
  const policy = fixedWindow({ limit: LIMIT, windowMs: WINDOW_MS });
  let queue: Waiting[] = [];
  let scheduled = false;
  const send = (items: Waiting[]): void => {
    const args: string[] = [TRIVIAL_SHA, String(items.length)];
    for (const item of items) args.push(item.key);
    args.push('0', '', ...wireOf(policy).args);
    // One cost for the batch when there are several keys, as sluice sends a batch of equal costs.
    if (items.length > 1) args.push('*1');
    else args.push('1');
    (redis.call('EVALSHA', ...args) as Promise<number[]>).then(
      (reply) => {
        const resetMs = reply[0] as number;
        for (let i = 0; i < items.length; i++) {
          (items[i] as Waiting).resolve({
            allowed: true,
            limit: LIMIT,
            remaining: reply[i + 1] as number,
            resetMs,
            retryAfterMs: 0,
          });
        }
      },
      (error: unknown) => {
        for (const item of items) item.reject(error);
      },
    );
  };
  const flush = (): void => {
    scheduled = false;
    const items = queue;
    queue = [];
    for (let at = 0; at < items.length; at += maxBatch) send(items.slice(at, at + maxBatch));
  };
  return {
    decide(identifier) {
      const key = stateKey('rl', 'bench', identifier);
      return new Promise<Decision>((resolve, reject) => {
        queue.push({ key, resolve, reject });
        if (!scheduled) {
          scheduled = true;
          process.nextTick(flush);
        }
      });
    },
    allowed: (decision) => decision.allowed,
  };
}

/** The floor as a contender; its script is loaded once, so every call is one EVALSHA. */
export function redisFloor(redis: Redis, maxBatch?: number): Contender {
  return {
    id: REDIS_FLOOR,
    library: 'floor',
    label: 'transport floor (trivial script, same batches)',
    kind: 'reference',
    async prepare() {
      await redis.script('LOAD', TRIVIAL_SCRIPT);
    },
    setup: () => transportFloor(redis, maxBatch) as Decider,
  };
}
