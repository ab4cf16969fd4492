// What the LLM scenario's processes share: the policy (tokens per minute per user), the estimate, the messages.
import { type GcraState, type Policy, tokenBucket } from '../../../src/index.js';

/** Tokens per minute per user. */
export const LIMIT = 20_000;
/** What a request is reserved at before its answer is known. */
export const ESTIMATE = 100;
/** The usage each answer reports in its final event: drawn at random between these. */
export const USAGE = { min: 50, max: 400 } as const;
/** Every request is this user's: the scenario is one user's quota under load. */
export const USER = 'user-1';

/**
 * How usage is counted: `settle` is sluice's reserve and settle (the estimate taken before, the
 * difference given back or charged after, into debt); `estimate` counts the estimate only;
 * `charge-only` admits while anything is left and counts the usage after the response with a
 * charge that is refused, and takes nothing, when it does not fit (usage dropped).
 */
export type Variant = 'settle' | 'estimate' | 'charge-only';
export const VARIANTS: readonly Variant[] = ['settle', 'estimate', 'charge-only'];

/** 20 000 tokens per minute: a bucket of 20 000 refilled over a minute. */
export function policy(): Policy<GcraState> {
  return tokenBucket({ capacity: LIMIT, refillPerSecond: LIMIT / 60 });
}

/** What a worker is asked to run. */
export interface Task {
  readonly redisPort: number;
  readonly upstream: string;
  readonly variant: Variant;
  /** The limiter's name: one per run, so that runs never share state. */
  readonly name: string;
  /** The limiters' clock, the same instant for every call (see scenario.ts); the server's when undefined. */
  readonly t0: number | undefined;
  readonly requests: number;
}

/** What a worker answers: each call's status and the usage its stream reported, and what its proxy counted. */
export interface Outcome {
  readonly calls: ReadonlyArray<{ readonly status: number; readonly tokens: number }>;
  /** Tokens the settles' charges did not take: the debt would have passed maxDebt. */
  readonly cutOff: number;
  /** Tokens the charge-only proxy's refused charges dropped. */
  readonly dropped: number;
}

/** The `total_tokens` of the last event of a stream that reports usage (OpenAI's `include_usage` chunk). */
export function usageIn(text: string): number | undefined {
  let found: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: {') || !line.includes('"usage"')) continue;
    const event = JSON.parse(line.slice(6)) as { usage?: { total_tokens?: unknown } | null };
    if (typeof event.usage?.total_tokens === 'number') found = event.usage.total_tokens;
  }
  return found;
}
