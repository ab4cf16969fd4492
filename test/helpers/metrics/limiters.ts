// The metrics suites' limiter: a fixed window on a given store and recorder, on a clock that never moves,
// so that no window rolls over between calls and every count is known in advance.
import {
  createLimiter,
  fixedWindow,
  type Limiter,
  type LimiterOptions,
  type MetricsRecorder,
  type Store,
} from '../../../src/index.js';

const clock = (): number => 1_800_000_000_000;

export function countedLimiter(
  store: Store,
  metrics: MetricsRecorder,
  name: string,
  limit: number,
  extra: Partial<LimiterOptions> = {},
): Limiter {
  return createLimiter({
    store,
    policy: fixedWindow({ limit, windowMs: 60_000 }),
    name,
    clock,
    metrics,
    ...extra,
  });
}
