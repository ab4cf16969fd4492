// The latency samples of one window, summed as requests end; the limit learns from each window once it closes.
import type { LimitWindow } from './limits/index.js';

/**
 * One window's running sums, reused from window to window: a request's end costs a few additions
 * and no allocation. `close` hands the algorithm a snapshot and starts the next window.
 */
export class SampleWindow implements LimitWindow {
  samples = 0;
  rttMs = 0;
  minRttMs = 0;
  maxInFlight = 0;
  dropped = false;
  refused = 0;
  #sumMs = 0;
  #startMs: number;

  constructor(nowMs: number, inFlight: number) {
    this.#startMs = nowMs;
    this.maxInFlight = inFlight;
  }

  /** Records that `inFlight` tickets are out now. */
  sawInFlight(inFlight: number): void {
    if (inFlight > this.maxInFlight) this.maxInFlight = inFlight;
  }

  /** Adds one request's latency; `true` when the window is due to close. */
  add(rttMs: number, dropped: boolean, nowMs: number, windowMs: number, windowSamples: number): boolean {
    this.samples += 1;
    this.#sumMs += rttMs;
    if (this.samples === 1 || rttMs < this.minRttMs) this.minRttMs = rttMs;
    if (dropped) this.dropped = true;
    return this.samples >= windowSamples && nowMs - this.#startMs >= windowMs;
  }

  /** Sets the mean for the algorithm to read; call `reset` once it has. */
  seal(): void {
    this.rttMs = this.#sumMs / this.samples;
  }

  /** Starts the next window at `nowMs` with `inFlight` tickets out. */
  reset(nowMs: number, inFlight: number): void {
    this.samples = 0;
    this.rttMs = 0;
    this.minRttMs = 0;
    this.maxInFlight = inFlight;
    this.dropped = false;
    this.refused = 0;
    this.#sumMs = 0;
    this.#startMs = nowMs;
  }
}
