// createShedder()'s options, their defaults, and the one function that checks them into a resolved config.
import { invalidOption } from '../errors.js';
import { durationMs, keyPart, knownKeys, optionsObject, positiveInteger } from '../validate.js';
import { type LimitOption, type ResolvedLimit, resolveLimit } from './limits/index.js';
import {
  defaultPriority,
  type PrioritiesOption,
  type ResolvedPriority,
  resolvePriorities,
} from './priorities.js';
import type { ShedMetricsRecorder } from './types.js';

/** The defaults of {@link ShedderOptions}. */
export const SHEDDER_DEFAULTS = { name: 'default', limit: 'gradient2', retryAfterMs: 1000 } as const;

/** Options of {@link createShedder}. */
export interface ShedderOptions {
  /**
   * The shedder's name: the `shedder` label of its metrics.
   * @default 'default'
   */
  readonly name?: string;
  /**
   * How the concurrency limit follows latency: `'gradient2'` (recent latency against its long-run
   * average), `'vegas'` (the queue estimated from latency above the no-load latency) or `'aimd'`
   * (grows by one, cut on drops); or an object with `algorithm`, the bounds `initial`, `min`,
   * `max`, the window `windowMs`, `windowSamples`, and the algorithm's own parameters.
   * @default 'gradient2'
   */
  readonly limit?: LimitOption;
  /**
   * The request classes, most important first, each with the fraction of the limit it keeps from
   * the classes below (`reserve`). A class is refused once in flight reaches `limit · (1 − the
   * reserves above it)`: the lowest first, the first class only when the whole limit is in use.
   * @default [{ name: 'critical', reserve: 0.2 }, { name: 'default', reserve: 0.1 }, 'sheddable']
   */
  readonly priorities?: PrioritiesOption;
  /**
   * The class of a request that names none.
   * @default 'default' when a class has that name, else the last class
   */
  readonly defaultPriority?: string;
  /**
   * A short wait for requests the limit refuses: up to `max` of them wait, the most important
   * class first and the oldest first within a class, each at most `timeoutMs`, then it is refused.
   * With a queue `acquire` returns a promise when the request waits.
   * @default undefined (no wait: refused at once)
   */
  readonly queue?: { readonly max: number; readonly timeoutMs: number };
  /**
   * What a refusal's `retryAfterMs` says (sent as `Retry-After`, in whole seconds, by the HTTP
   * middleware): long enough that refused clients do not come straight back into the overload.
   * @default 1000
   */
  readonly retryAfterMs?: number;
  /**
   * The clock latencies are read from, in ms. A test passes its own to drive windows by hand.
   * @default performance.now
   */
  readonly now?: () => number;
  /** Where the shedder's limit, tickets in flight, refusals and latency are exposed (`sluice/metrics`). */
  readonly metrics?: ShedMetricsRecorder;
}

/** The options after defaults and checks. */
export interface ResolvedShedderOptions {
  readonly name: string;
  readonly limit: ResolvedLimit;
  readonly priorities: readonly ResolvedPriority[];
  readonly defaultPriority: ResolvedPriority;
  readonly queue: { readonly max: number; readonly timeoutMs: number } | undefined;
  readonly retryAfterMs: number;
  readonly now: () => number;
  readonly metrics: ShedMetricsRecorder | undefined;
}

function resolveQueue(value: unknown): ResolvedShedderOptions['queue'] {
  if (value === undefined) return undefined;
  const raw = optionsObject('queue', value, true);
  knownKeys('queue', raw, ['max', 'timeoutMs']);
  return {
    max: positiveInteger('queue.max', raw.max, 1_000_000),
    timeoutMs: durationMs('queue.timeoutMs', raw.timeoutMs),
  };
}

/** Applies defaults and checks every option; throws ERR_SLUICE_INVALID_OPTION naming the first bad one. */
export function resolveShedderOptions(options: ShedderOptions | undefined): ResolvedShedderOptions {
  const raw = optionsObject('createShedder options', options, false);
  knownKeys('createShedder', raw, [
    'name',
    'limit',
    'priorities',
    'defaultPriority',
    'queue',
    'retryAfterMs',
    'now',
    'metrics',
  ]);
  const priorities = resolvePriorities(raw.priorities);
  const now = raw.now ?? (() => performance.now());
  if (typeof now !== 'function') throw invalidOption('now', 'a function returning milliseconds', now);
  const metrics = raw.metrics as ShedMetricsRecorder | undefined;
  if (
    metrics !== undefined &&
    (typeof metrics !== 'object' || metrics === null || typeof metrics.track !== 'function')
  ) {
    throw invalidOption(
      'metrics',
      'a recorder from prometheusShedMetrics() or openTelemetryShedMetrics()',
      metrics,
    );
  }
  return {
    name: keyPart('name', raw.name ?? SHEDDER_DEFAULTS.name),
    limit: resolveLimit(raw.limit as LimitOption | undefined),
    priorities,
    defaultPriority: defaultPriority(priorities, raw.defaultPriority),
    queue: resolveQueue(raw.queue),
    retryAfterMs: durationMs('retryAfterMs', raw.retryAfterMs ?? SHEDDER_DEFAULTS.retryAfterMs),
    now: now as () => number,
    metrics,
  };
}
