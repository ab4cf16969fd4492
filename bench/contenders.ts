// Everything the benchmark races on Redis: each sluice algorithm, the peers on the same Redis and the
// same ioredis client, and the classic token-bucket script as the reference for Redis-side cost.
import { Ratelimit } from '@upstash/ratelimit';
import type { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import {
  createLimiter,
  type Decision,
  fixedWindow,
  gcra,
  type Limiter,
  type Policy,
  RedisStore,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../src/index.js';
import type { Decider } from './load.js';
import { upstashAdapter } from './upstash-adapter.js';

/** The kinds of algorithm a sluice algorithm is paired with. */
export type Kind = 'fixed-window' | 'sliding-window' | 'sliding-log' | 'token-bucket' | 'gcra' | 'reference';

export interface Contender {
  /** Stable id in results, e.g. `sluice.gcra` or `upstash.tokenBucket`. */
  readonly id: string;
  readonly library: 'sluice' | 'rate-limiter-flexible' | '@upstash/ratelimit' | 'classic' | 'floor';
  /** How the library names it. */
  readonly label: string;
  readonly kind: Kind;
  /** Runs once before each run, after the database is emptied (e.g. loads a script). */
  prepare?(): Promise<void>;
  /** Builds the decider (defines scripts, creates limiters); called once per run. */
  setup(): Decider;
  /** Script calls sent by sluice's store, when the contender is sluice on Redis. */
  readonly calls?: () => number;
  /** Decisions so far that the store did not make (a `reason` such as `timeout`); sluice only. */
  readonly notFromStore?: () => number;
}

/**
 * Every decision in the race must come from Redis, as the peers' do (they have no deadline): a
 * deadline far above any latency seen here. Decisions with a `reason` are counted all the same.
 */
export const BENCH_TIMEOUT_MS = 10_000;

/**
 * The policy parameters every contender shares: generous enough that a 10 000-identifier run never
 * denies (throughput then compares the same work: read, decide, write), one minute long.
 */
export const LIMIT = 1000;
export const WINDOW_MS = 60_000;
/**
 * The token buckets of the race refill 20 per second (interval 50 ms): LIMIT per minute would be
 * 16.666... per second, an interval of 59.99999999999999 ms, which nobody configures on purpose.
 */
export const REFILL_PER_SECOND = 20;

/** A sluice algorithm, with its policy for LIMIT per `windowMs` (the token bucket refills LIMIT per window). */
export interface SluicePolicy {
  readonly label: string;
  readonly kind: Kind;
  make(windowMs?: number): Policy;
}

export const SLUICE_POLICIES: readonly SluicePolicy[] = [
  {
    label: 'fixedWindow',
    kind: 'fixed-window',
    make: (w = WINDOW_MS) => fixedWindow({ limit: LIMIT, windowMs: w }),
  },
  {
    label: 'slidingLog',
    kind: 'sliding-log',
    make: (w = WINDOW_MS) => slidingLog({ limit: LIMIT, windowMs: w }),
  },
  {
    label: 'slidingWindow',
    kind: 'sliding-window',
    make: (w = WINDOW_MS) => slidingWindow({ limit: LIMIT, windowMs: w }),
  },
  {
    label: 'tokenBucket',
    kind: 'token-bucket',
    make: (w = WINDOW_MS) =>
      tokenBucket({
        capacity: LIMIT,
        refillPerSecond: w === WINDOW_MS ? REFILL_PER_SECOND : LIMIT / (w / 1000),
      }),
  },
  { label: 'gcra', kind: 'gcra', make: (w = WINDOW_MS) => gcra({ limit: LIMIT, periodMs: w }) },
];

/**
 * The classic token bucket as tutorials write it (TIME, HMGET, HSET, PEXPIRE; tokens and a timestamp
 * in a hash): one EVALSHA per decision, the reference for Redis-side cost.
 */
export const CLASSIC_TOKEN_BUCKET = `-- KEYS[1] = rl:tb:{client}; ARGV: capacity, refill rate per second, cost
local key      = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate     = tonumber(ARGV[2])
local cost     = tonumber(ARGV[3])

local t   = redis.call('TIME')       -- {seconds, microseconds} from the server
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local state  = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts     = tonumber(state[2]) or now

tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate / 1000)

local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end

redis.call('HSET', key, 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', key, math.ceil(capacity / rate * 1000) * 2)
return { allowed, math.floor(tokens) }
`;

type ClassicClient = Redis & {
  classicTokenBucket(key: string, capacity: string, rate: string, cost: string): Promise<[number, number]>;
};

/** A sluice limiter on Redis; `maxBatch` 1 turns coalescing off. */
export function sluiceRedis(
  redis: Redis,
  policy: SluicePolicy,
  maxBatch?: number,
  windowMs = WINDOW_MS,
  denyCache = false,
): Contender {
  let store: RedisStore | undefined;
  let notFromStore = 0;
  const suffix = (maxBatch === undefined ? '' : `.maxBatch${maxBatch}`) + (denyCache ? '.denyCache' : '');
  return {
    id: `sluice.${policy.label}${suffix}`,
    library: 'sluice',
    label:
      policy.label +
      (maxBatch === undefined ? '' : ` (maxBatch ${maxBatch})`) +
      (denyCache ? ' (denyCache)' : ''),
    kind: policy.kind,
    setup() {
      store = new RedisStore(maxBatch === undefined ? { client: redis } : { client: redis, maxBatch });
      const limiter: Limiter = createLimiter({
        store,
        policy: policy.make(windowMs),
        name: 'bench',
        timeoutMs: BENCH_TIMEOUT_MS,
        denyCache,
      });
      return {
        decide: (identifier: string) => limiter.limit(identifier),
        allowed: (decision: Decision) => {
          if (decision.reason !== undefined) notFromStore++;
          return decision.allowed;
        },
      } as Decider;
    },
    calls: () => store?.calls ?? 0,
    notFromStore: () => notFromStore,
  };
}

/** rate-limiter-flexible resolves an allowed request and rejects a denied one with a RateLimiterRes. */
export function rlfDecider(consume: (identifier: string) => Promise<unknown>): Decider {
  return {
    decide: consume,
    allowed: () => true,
    denial: (reason) => reason instanceof RateLimiterRes,
  };
}

export function peersOnRedis(redis: Redis, windowMs = WINDOW_MS): Contender[] {
  const upstash = upstashAdapter(redis);
  const upstashLimiter = (limiter: ConstructorParameters<typeof Ratelimit>[0]['limiter']): Decider => {
    const ratelimit = new Ratelimit({
      // The adapter implements the two methods the library calls; see upstash-adapter.ts.
      redis: upstash as unknown as ConstructorParameters<typeof Ratelimit>[0]['redis'],
      limiter,
      prefix: 'upstash',
      analytics: false,
      // Its fastest setting: no per-call timer racing the reply.
      timeout: 0,
    });
    return {
      decide: (identifier: string) => ratelimit.limit(identifier),
      allowed: (response: { readonly success: boolean }) => response.success,
    } as Decider;
  };
  return [
    {
      id: 'rlf.RateLimiterRedis',
      library: 'rate-limiter-flexible',
      label: 'RateLimiterRedis',
      kind: 'fixed-window',
      setup() {
        const limiter = new RateLimiterRedis({
          storeClient: redis,
          points: LIMIT,
          duration: windowMs / 1000,
          keyPrefix: 'rlflx',
        });
        return rlfDecider((identifier) => limiter.consume(identifier));
      },
    },
    {
      id: 'upstash.fixedWindow',
      library: '@upstash/ratelimit',
      label: 'fixedWindow',
      kind: 'fixed-window',
      setup: () => upstashLimiter(Ratelimit.fixedWindow(LIMIT, `${windowMs} ms`)),
    },
    {
      id: 'upstash.slidingWindow',
      library: '@upstash/ratelimit',
      label: 'slidingWindow',
      kind: 'sliding-window',
      setup: () => upstashLimiter(Ratelimit.slidingWindow(LIMIT, `${windowMs} ms`)),
    },
    {
      id: 'upstash.tokenBucket',
      library: '@upstash/ratelimit',
      label: 'tokenBucket',
      kind: 'token-bucket',
      // refillRate tokens every interval, at most maxTokens: as sluice's bucket, bursts of LIMIT.
      setup: () =>
        upstashLimiter(
          windowMs === WINDOW_MS
            ? Ratelimit.tokenBucket(REFILL_PER_SECOND, '1 s', LIMIT)
            : Ratelimit.tokenBucket(LIMIT, `${windowMs} ms`, LIMIT),
        ),
    },
  ];
}

export const CLASSIC = 'classic.tokenBucket';

/** The classic token bucket, one call per decision, through ioredis's EVALSHA-then-EVAL command. */
export function classicReference(redis: Redis): Contender {
  return {
    id: CLASSIC,
    library: 'classic',
    label: 'token bucket script',
    kind: 'reference',
    setup() {
      const client = redis as ClassicClient;
      if (typeof client.classicTokenBucket !== 'function') {
        redis.defineCommand('classicTokenBucket', { numberOfKeys: 1, lua: CLASSIC_TOKEN_BUCKET });
      }
      const capacity = String(LIMIT);
      const rate = String(REFILL_PER_SECOND);
      return {
        decide: (identifier: string) =>
          client.classicTokenBucket(`rl:tb:{${identifier}}`, capacity, rate, '1'),
        allowed: (reply: [number, number]) => reply[0] === 1,
      } as Decider;
    },
  };
}

/**
 * Which peers each sluice algorithm is measured against: the same kind of algorithm. No peer keeps
 * an exact log on Redis or implements GCRA, so the sliding log meets the nearest kind (the sliding
 * window counters) and GCRA meets the token buckets, whose rule it is.
 */
export const PAIRINGS: Readonly<Record<string, { readonly peers: readonly string[]; readonly why: string }>> =
  {
    'sluice.fixedWindow': {
      peers: ['rlf.RateLimiterRedis', 'upstash.fixedWindow'],
      why: 'fixed window counters (RateLimiterRedis is one: INCRBY with an expiry per duration)',
    },
    'sluice.slidingWindow': { peers: ['upstash.slidingWindow'], why: 'sliding window counters' },
    'sluice.slidingLog': {
      peers: ['upstash.slidingWindow'],
      why: 'no peer keeps an exact log on Redis; the nearest kind is the sliding window counter',
    },
    'sluice.tokenBucket': { peers: ['upstash.tokenBucket'], why: 'token buckets' },
    'sluice.gcra': {
      peers: ['upstash.tokenBucket'],
      why: 'no peer implements GCRA; it is the token bucket rule kept as one timestamp',
    },
  };
