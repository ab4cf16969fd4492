// Steady load for the failover suites: many concurrent callers, every outcome recorded (decision or error).
import { afterEach } from 'node:test';
import type { Decision, RedisStore } from '../../src/index.js';
import type { ClientKind } from './clients.js';

/** One store of a failover suite: a client library in one mode, with its own key prefix. */
export interface Rig {
  readonly kind: ClientKind;
  readonly mode: 'scripts' | 'functions';
  readonly label: string;
  readonly store: RedisStore;
}

export interface Outcome {
  /** ms since the load started, when the call was made. */
  readonly sentAt: number;
  /** ms since the load started, when the call returned. */
  readonly at: number;
  readonly identifier: string;
  readonly decision?: Decision;
  /** The error's `code` (or `name` when it has none) for a rejected call. */
  readonly error?: string;
  readonly message?: string;
}

export interface Load {
  readonly startedAt: number;
  /** Outcomes so far. */
  readonly outcomes: readonly Outcome[];
  /** Stops the callers and resolves once every call in flight has returned. */
  stop(): Promise<Outcome[]>;
}

export interface LoadOptions {
  /** Sends one request; the load records what it resolves or rejects with. */
  readonly call: (identifier: string) => Promise<Decision>;
  readonly identifiers: readonly string[];
  /**
   * Callers running at once, each sending its next request when the previous one returned.
   * @default 16
   */
  readonly concurrency?: number;
  /**
   * Pause between one caller's requests, in ms, so the load does not starve the servers on a small machine.
   * @default 2
   */
  readonly pauseMs?: number;
}

export function startLoad(options: LoadOptions): Load {
  const { call, identifiers } = options;
  const concurrency = options.concurrency ?? 16;
  const pauseMs = options.pauseMs ?? 2;
  const startedAt = Date.now();
  const outcomes: Outcome[] = [];
  let running = true;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (running) {
      const identifier = identifiers[next++ % identifiers.length] as string;
      const sentAt = Date.now() - startedAt;
      try {
        const decision = await call(identifier);
        outcomes.push({ sentAt, at: Date.now() - startedAt, identifier, decision });
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        outcomes.push({
          sentAt,
          at: Date.now() - startedAt,
          identifier,
          error: typeof code === 'string' ? code : (error as Error).name,
          message: (error as Error).message,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  return {
    startedAt,
    outcomes,
    async stop() {
      running = false;
      await Promise.all(workers);
      return outcomes;
    },
  };
}

/**
 * `startLoad` for a suite: every load it starts is stopped after the test, even when an assertion
 * fails first. Call once at the top level of a test file.
 */
export function trackedLoads(): (options: LoadOptions) => Load {
  const running = new Set<Load>();
  afterEach(async () => {
    await Promise.all([...running].map((each) => each.stop()));
    running.clear();
  });
  return (options) => {
    const started = startLoad(options);
    running.add(started);
    return started;
  };
}

/** Waits `ms` (the load keeps running meanwhile). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Errors, fallbacks and successes of a run, and when the errors happened. */
export function summarize(outcomes: readonly Outcome[]): {
  total: number;
  decided: number;
  errors: number;
  fellBack: number;
  codes: Record<string, number>;
  firstErrorAt: number | undefined;
  lastErrorAt: number | undefined;
  /** The longest any call waited for its answer, in ms. */
  longestWaitMs: number;
} {
  const codes: Record<string, number> = {};
  let errors = 0;
  let fellBack = 0;
  let decided = 0;
  let firstErrorAt: number | undefined;
  let lastErrorAt: number | undefined;
  let longestWaitMs = 0;
  for (const outcome of outcomes) {
    longestWaitMs = Math.max(longestWaitMs, outcome.at - outcome.sentAt);
    const failed = outcome.error !== undefined || outcome.decision?.reason !== undefined;
    if (outcome.error !== undefined) {
      errors++;
      codes[outcome.error] = (codes[outcome.error] ?? 0) + 1;
    } else if (outcome.decision?.reason !== undefined) {
      fellBack++;
      const label = `reason:${outcome.decision.reason}`;
      codes[label] = (codes[label] ?? 0) + 1;
    } else {
      decided++;
    }
    if (failed) {
      firstErrorAt ??= outcome.at;
      lastErrorAt = outcome.at;
    }
  }
  return {
    total: outcomes.length,
    decided,
    errors,
    fellBack,
    codes,
    firstErrorAt,
    lastErrorAt,
    longestWaitMs,
  };
}
