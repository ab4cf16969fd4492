// The service's log of what went wrong per request: counted, and written as one summary line per interval at most.
import { formatNumber } from '../cli/output.js';

/** How often, at most, the service writes a line about refused or failed requests. */
export const SUMMARY_INTERVAL_MS = 10_000;

/** The longest error text a summary quotes: enough to recognise it, never a client's whole input. */
const MAX_ERROR_TEXT = 200;

/**
 * Counts refused requests (by status) and requests the service failed, and writes what it counted
 * at most once per interval: a client sending bad requests in a loop costs the log one line every
 * ten seconds, not one per request. The timer runs only while there is something to write, and
 * never keeps the process alive.
 */
export class RequestLog {
  readonly #write: (line: string) => void;
  readonly #intervalMs: number;
  readonly #refused = new Map<number, number>();
  #failed = 0;
  #firstFailure = '';
  #timer: NodeJS.Timeout | undefined;
  #since = 0;

  constructor(write: (line: string) => void, intervalMs = SUMMARY_INTERVAL_MS) {
    this.#write = write;
    this.#intervalMs = intervalMs;
  }

  /** A request answered with a 4xx: the client's mistake. */
  refused(status: number): void {
    this.#refused.set(status, (this.#refused.get(status) ?? 0) + 1);
    this.#schedule();
  }

  /** A request the service could not answer (500, or 503 when its store failed). */
  failed(text: string): void {
    if (this.#failed === 0) this.#firstFailure = text.slice(0, MAX_ERROR_TEXT);
    this.#failed++;
    this.#schedule();
  }

  /** Writes what was counted since the last line, if anything. */
  flush(now = Date.now()): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const seconds = Math.max(1, Math.round((now - this.#since) / 1000));
    let refused = 0;
    for (const count of this.#refused.values()) refused += count;
    if (refused > 0) {
      const byStatus = [...this.#refused]
        .sort(([a], [b]) => a - b)
        .map(([status, count]) => `${formatNumber(count)} x ${status}`)
        .join(', ');
      this.#write(
        `sluice serve: refused ${formatNumber(refused)} malformed request${refused === 1 ? '' : 's'} in the last ${seconds} s (${byStatus})`,
      );
    }
    if (this.#failed > 0) {
      this.#write(
        `sluice serve: ${formatNumber(this.#failed)} request${this.#failed === 1 ? '' : 's'} failed in the service in the last ${seconds} s; the first: ${this.#firstFailure}`,
      );
    }
    this.#refused.clear();
    this.#failed = 0;
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    this.#since = Date.now();
    this.#timer = setTimeout(() => this.flush(), this.#intervalMs);
    this.#timer.unref();
  }
}
