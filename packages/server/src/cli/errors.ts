// How the CLI fails: one line for the operator, and an exit code a script or cron job can branch on.

/** Exit codes shared by every command; docs/cli.md lists them. */
export const EXIT = {
  /** Done, and nothing to report. */
  OK: 0,
  /** Done, and something is wrong: audit found keys, verify found an algorithm that is not exact. */
  FOUND: 1,
  /** Could not run: bad arguments, bad URL, refused connection, failed AUTH, not a Redis server. */
  ERROR: 2,
  /** Stopped by Ctrl-C (128 + SIGINT), after cleaning up. */
  INTERRUPTED: 130,
} as const;

/** An error meant for the operator: its message is the one line printed, without a stack unless --verbose. */
export class CliError extends Error {
  override readonly name = 'CliError';
}

/** The one-line text of any error, for messages about things that failed underneath. */
export function errorText(error: unknown): string {
  if (error instanceof Error) return error.message.split('\n')[0] ?? error.name;
  return String(error);
}
