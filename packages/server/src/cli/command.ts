// What a command is: its arguments (for parsing and --help) and a run() that returns an exit code.
import type { CommandSpec, Values } from './args.js';

export interface Context {
  readonly values: Values;
  readonly positionals: readonly string[];
  /** Aborted by Ctrl-C: stop soon, clean up, return. */
  readonly signal: AbortSignal;
  /** `--json`: one JSON document on stdout, nothing else there. */
  readonly json: boolean;
  /** Writes a line (or lines) to stdout. */
  out(text: string): void;
  /** Writes a line to stderr: progress, warnings, what is being done. */
  err(text: string): void;
}

export interface Command extends CommandSpec {
  /** Runs the command; resolves to the exit code (see EXIT). */
  run(context: Context): Promise<number>;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
