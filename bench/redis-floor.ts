// The transport floor on Redis: the batches sluice's RedisStore would send (the decisions of a tick,
// up to maxBatch keys per call, keys built the same way), each sent by the same client as one EVALSHA
// of a script that does nothing but return a reply of the same shape, four integers per key.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { type Decision, fixedWindow } from '../src/index.js';
import { stateKey } from '../src/keys.js';
import { type Contender, LIMIT, WINDOW_MS } from './contenders.js';
import type { Decider } from './load.js';

export const REDIS_FLOOR = 'floor.redis.transport';

/** The reply of sluice's scripts (allowed, remaining, resetMs, retryAfterMs per key), without deciding anything. */
export const TRIVIAL_SCRIPT = `local out = {}
for i = 1, #KEYS do
  local n = #out
  out[n + 1] = 1
  out[n + 2] = ${LIMIT - 1}
  out[n + 3] = ${WINDOW_MS}
  out[n + 4] = 0
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
 * parameters, one cost per key) and resolves each decision with the fields of its four integers.
 */
export function transportFloor(redis: Redis, maxBatch = 64): Decider<Decision> {
  const policy = fixedWindow({ limit: LIMIT, windowMs: WINDOW_MS });
  let queue: Waiting[] = [];
  let scheduled = false;
  const send = (items: Waiting[]): void => {
    const args: string[] = [TRIVIAL_SHA, String(items.length)];
    for (const item of items) args.push(item.key);
    args.push('0', '', ...policy.args);
    for (let i = 0; i < items.length; i++) args.push('1');
    (redis.call('EVALSHA', ...args) as Promise<number[]>).then(
      (reply) => {
        for (let i = 0; i < items.length; i++) {
          const base = i * 4;
          (items[i] as Waiting).resolve({
            allowed: reply[base] === 1,
            limit: LIMIT,
            remaining: reply[base + 1] as number,
            resetMs: reply[base + 2] as number,
            retryAfterMs: reply[base + 3] as number,
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
