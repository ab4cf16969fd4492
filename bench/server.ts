// The benchmark's own redis-server on loopback, and the admin connection that reads its statistics.
import { Redis } from 'ioredis';
import { type RedisServer, startRedis } from '../test/helpers/redis-server.js';

export interface CommandStat {
  readonly calls: number;
  readonly usec: number;
}

/** Commands a client sends to run a script; their `usec` includes the commands the script runs. */
export const SCRIPT_COMMANDS = ['eval', 'evalsha', 'fcall', 'fcall_ro'] as const;

export interface BenchServer {
  readonly server: RedisServer;
  /** For FLUSHALL, INFO and CONFIG: never the client the contenders share. */
  readonly admin: Redis;
  /** The client every contender shares. */
  readonly client: Redis;
  readonly version: string;
  flush(): Promise<void>;
  /** CONFIG RESETSTAT: zeroes INFO commandstats. */
  resetStats(): Promise<void>;
  /** INFO commandstats, by lower-case command name. */
  commandStats(): Promise<Map<string, CommandStat>>;
  /** The server process's CPU time so far (user + system), in microseconds. */
  cpuUsec(): Promise<number>;
  /** INFO memory's used_memory, in bytes. */
  usedMemory(): Promise<number>;
  close(): Promise<void>;
}

function infoField(info: string, field: string): string | undefined {
  const match = new RegExp(`^${field}:(.*)$`, 'm').exec(info);
  return match?.[1]?.trim();
}

export async function startBenchServer(): Promise<BenchServer> {
  const server = await startRedis();
  const options = { host: server.host, port: server.port, lazyConnect: true };
  const admin = new Redis({ ...options, maxRetriesPerRequest: 1 });
  // Set up as sluice's README asks (no offline queue, no resend after a lost connection); the peers
  // share it, and none of this matters on a connection that stays up.
  const client = new Redis({ ...options, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  await Promise.all([admin.connect(), client.connect()]);
  const version = infoField(await admin.info('server'), 'redis_version') ?? 'unknown';
  return {
    server,
    admin,
    client,
    version,
    async flush() {
      await admin.flushall();
    },
    async resetStats() {
      await admin.config('RESETSTAT');
    },
    async commandStats() {
      const stats = new Map<string, CommandStat>();
      for (const line of (await admin.info('commandstats')).split('\n')) {
        const match = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
        if (match !== null) {
          stats.set((match[1] as string).toLowerCase(), { calls: Number(match[2]), usec: Number(match[3]) });
        }
      }
      return stats;
    },
    async cpuUsec() {
      const info = await admin.info('cpu');
      const seconds =
        Number(infoField(info, 'used_cpu_user') ?? 0) + Number(infoField(info, 'used_cpu_sys') ?? 0);
      return seconds * 1e6;
    },
    async usedMemory() {
      return Number(infoField(await admin.info('memory'), 'used_memory') ?? 0);
    },
    async close() {
      client.disconnect();
      admin.disconnect();
      await server.stop();
    },
  };
}

/** Script calls and their server time, summed over the script commands. */
export function scriptTotals(stats: Map<string, CommandStat>): CommandStat {
  let calls = 0;
  let usec = 0;
  for (const name of SCRIPT_COMMANDS) {
    const stat = stats.get(name);
    if (stat !== undefined) {
      calls += stat.calls;
      usec += stat.usec;
    }
  }
  return { calls, usec };
}
