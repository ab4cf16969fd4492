// The overload guard on the dashboard: its limit and refusals sampled once a second over the last five minutes.
import type { GuardSettings, GuardStats, ServiceGuard } from '../service/guard.js';
import { HISTORY_SECONDS } from './history.js';

/** The guard as the data endpoint sends it. */
export interface GuardView extends GuardStats {
  readonly settings: GuardSettings;
  /** Per interval, oldest first (the last one is the current, unfinished second): the limit at its end. */
  readonly limitSeries: number[];
  /** Calls refused per interval, every protocol together. */
  readonly refusedSeries: number[];
}

interface Sample {
  readonly limit: number;
  readonly refused: number;
}

function sample(stats: GuardStats): Sample {
  return { limit: stats.limit, refused: stats.refused.grpc + stats.refused.http };
}

/** Samples the guard once a second; `view()` adds the current, unfinished second. */
export class GuardHistory {
  readonly #guard: ServiceGuard;
  readonly #samples: Sample[] = [];
  readonly #timer: NodeJS.Timeout;

  constructor(guard: ServiceGuard) {
    this.#guard = guard;
    this.tick();
    this.#timer = setInterval(() => this.tick(), 1000);
    this.#timer.unref();
  }

  tick(): void {
    this.#samples.push(sample(this.#guard.stats()));
    if (this.#samples.length > HISTORY_SECONDS) this.#samples.shift();
  }

  close(): void {
    clearInterval(this.#timer);
  }

  view(): GuardView {
    const stats = this.#guard.stats();
    const points = [...this.#samples, sample(stats)];
    const steps = points.slice(1);
    return {
      ...stats,
      settings: this.#guard.settings,
      limitSeries: steps.map((point) => point.limit),
      refusedSeries: steps.map((point, i) => Math.max(0, point.refused - (points[i] as Sample).refused)),
    };
  }
}
