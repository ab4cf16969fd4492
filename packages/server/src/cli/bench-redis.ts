// What `sluice bench` reads from Redis beside its decisions: script time (INFO commandstats) and SLOWLOG.
import type { RedisStore } from 'sluice';
import { errorText } from './errors.js';
import { type Connection, onEveryPrimary } from './redis.js';

const SCRIPT_COMMANDS = ['evalsha', 'eval', 'fcall'];

export interface ScriptStats {
  readonly calls: number;
  readonly usec: number;
}

/** Sums calls and microseconds of the script commands over every primary; null when INFO is refused. */
export async function scriptStats(connection: Connection): Promise<ScriptStats | null> {
  try {
    const infos = await onEveryPrimary(connection, 'INFO', 'commandstats');
    let calls = 0;
    let usec = 0;
    for (const info of infos) {
      for (const command of SCRIPT_COMMANDS) {
        const match = new RegExp(`^cmdstat_${command}:calls=(\\d+),usec=(\\d+)`, 'm').exec(String(info));
        if (match !== null) {
          calls += Number(match[1]);
          usec += Number(match[2]);
        }
      }
    }
    return { calls, usec };
  } catch {
    return null;
  }
}

/** A SLOWLOG entry: id, Unix time, microseconds, the command's arguments, then client details. */
export type SlowEntry = [number, number, number, string[], ...unknown[]];

/** The last `count` SLOWLOG entries of every primary; null when SLOWLOG is refused. */
export async function slowlog(connection: Connection, count: number): Promise<SlowEntry[] | null> {
  try {
    const replies = await onEveryPrimary(connection, 'SLOWLOG', 'GET', count);
    return replies.flatMap((reply) => reply as SlowEntry[]);
  } catch {
    return null;
  }
}

/** The threshold SLOWLOG logs above, in µs; null when CONFIG is refused. */
export async function slowlogThresholdUs(connection: Connection): Promise<number | null> {
  try {
    const reply = (await connection.primaries[0]?.call(
      'CONFIG',
      'GET',
      'slowlog-log-slower-than',
    )) as string[];
    return reply[1] === undefined ? null : Number(reply[1]);
  } catch {
    return null;
  }
}

/** Whether an entry is a script call on a key under `prefix`: a limiter's decision. */
export function isScriptCallOn(entry: SlowEntry, prefix: string): boolean {
  const args = entry[3].map(String);
  return (
    SCRIPT_COMMANDS.includes((args[0] ?? '').toLowerCase()) &&
    args.some((arg) => arg.startsWith(`${prefix}:`))
  );
}

/** Deletes the run's keys; a failure is reported, not thrown: they expire within minutes anyway. */
export async function deleteRunKeys(
  connection: Connection,
  store: RedisStore,
  names: readonly string[],
  keys: number,
  report: (line: string) => void,
): Promise<void> {
  try {
    for (const name of names) {
      for (let start = 0; start < keys; start += 500) {
        const batch: Array<Promise<unknown>> = [];
        for (let i = start; i < Math.min(keys, start + 500); i++) {
          batch.push(connection.client.unlink(store.keyFor(name, `id-${i}`)));
        }
        await Promise.all(batch);
      }
    }
  } catch (error) {
    report(
      `bench: could not delete its keys under ${store.prefix}: (${errorText(error)}); they expire within minutes.`,
    );
  }
}
