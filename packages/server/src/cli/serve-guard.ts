// `sluice serve`'s overload guard: its flags, and the settings they make.
import { GUARD_DEFAULTS, type GuardSettings } from '../service/guard.js';
import { optional, parseDuration, parsePositiveInteger, stringFlag, type Values } from './args.js';
import { CliError } from './errors.js';

/** Flags `serve` takes for the guard. */
export const GUARD_FLAGS = {
  'no-shed': { type: 'boolean' },
  'shed-limit': { type: 'string' },
  'shed-min': { type: 'string' },
  'shed-max': { type: 'string' },
  'shed-queue': { type: 'string' },
  'shed-burst': { type: 'string' },
  'shed-wait': { type: 'string' },
  'shed-streams': { type: 'string' },
} as const;

const ms = (value: number): string => (value % 1000 === 0 ? `${value / 1000}s` : `${value}ms`);

export const GUARD_FLAGS_HELP = `Overload (on by default): decisions (POST /v1/limit, /v1/charge, /v1/reserve, /v1/extend,
POST /json, gRPC ShouldRateLimit) run under a concurrency limit that follows their latency; past
it a call waits briefly, then is refused before it is read: gRPC RESOURCE_EXHAUSTED, HTTP 503 with
Retry-After. A call is also refused at once when the event loop is further behind by the process's
own work (its CPU time, not a busy machine's) than the call's gRPC deadline, or (without one) has
been behind by more than --shed-wait for --shed-burst.
Refusals are counted in sluice_service_shed_total, never as store failures.
  --no-shed           take every call, however many (no refusals, no limit)
  --shed-limit <n>    the concurrency limit at start (default ${GUARD_DEFAULTS.initial}); it then moves with latency
  --shed-min <n>      the least it goes down to (default ${GUARD_DEFAULTS.min})
  --shed-max <n>      the most it goes up to (default ${GUARD_DEFAULTS.max})
  --shed-queue <n>    the most calls waiting for room (default ${GUARD_DEFAULTS.queue}; 0 refuses at once)
  --shed-burst <time> how long calls may keep waiting (or the loop stay behind) before it counts as
                      overload rather than a burst, and the longest a call without a deadline
                      waits in a burst (default ${ms(GUARD_DEFAULTS.burstMs)})
  --shed-wait <time>  the longest a call without a deadline waits under overload, newest first
                      (default ${ms(GUARD_DEFAULTS.waitMs)})
  --shed-streams <n>  the most gRPC calls one connection holds open at once (default ${GUARD_DEFAULTS.streams})`;

/** A count flag that may be 0. */
function parseCount(flag: string, text: string): number {
  return text.trim() === '0' ? 0 : parsePositiveInteger(flag, text, 1_000_000);
}

/** The guard's settings from the flags, or undefined with `--no-shed`; inconsistent bounds are a CliError (exit 2). */
export function guardSettings(values: Values): GuardSettings | undefined {
  const own = Object.keys(GUARD_FLAGS).filter(
    (flag) => flag !== 'no-shed' && stringFlag(values, flag) !== undefined,
  );
  if (values['no-shed'] === true) {
    if (own.length > 0)
      throw new CliError(
        `\`--${own[0]}\` sets the overload guard, which \`--no-shed\` turns off: give one or the other.`,
      );
    return undefined;
  }
  const count = (flag: string, fallback: number): number =>
    optional(values, flag, (name, text) => parsePositiveInteger(name, text, 1_000_000), fallback);
  const min = count('shed-min', GUARD_DEFAULTS.min);
  const max = count('shed-max', GUARD_DEFAULTS.max);
  // A limit given alone that is below the default least (or above the default most) moves that bound with it.
  const initial = count('shed-limit', Math.min(max, Math.max(min, GUARD_DEFAULTS.initial)));
  const settings: GuardSettings = {
    initial,
    min: stringFlag(values, 'shed-min') === undefined ? Math.min(min, initial) : min,
    max: stringFlag(values, 'shed-max') === undefined ? Math.max(max, initial) : max,
    queue: optional(values, 'shed-queue', parseCount, GUARD_DEFAULTS.queue),
    burstMs: optional(values, 'shed-burst', parseDuration, GUARD_DEFAULTS.burstMs),
    waitMs: optional(values, 'shed-wait', parseDuration, GUARD_DEFAULTS.waitMs),
    retryAfterMs: GUARD_DEFAULTS.retryAfterMs,
    streams: count('shed-streams', GUARD_DEFAULTS.streams),
  };
  if (!(settings.min <= settings.initial && settings.initial <= settings.max)) {
    throw new CliError(
      `Expected --shed-min <= --shed-limit <= --shed-max, got ${settings.min}, ${settings.initial} and ${settings.max}.`,
    );
  }
  return settings;
}
