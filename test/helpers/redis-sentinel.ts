// A real Sentinel deployment on loopback: a primary, its replica, and three sentinel processes (Redis or Valkey).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RedisServer, requireRedisBinary, startRedis } from './redis-server.js';
import { infoFields, pollUntil, type Reply, redisCommand } from './resp.js';
import { SERVER_FAMILY } from './server-family.js';

export interface SentinelDeployment {
  /** The name the sentinels monitor the primary under. */
  readonly name: string;
  /** The data nodes: [initial primary, initial replica]. */
  readonly servers: readonly [RedisServer, RedisServer];
  readonly sentinels: readonly RedisServer[];
  /** `[{ host, port }]` of the sentinels, as clients take them. */
  readonly sentinelNodes: ReadonlyArray<{ host: string; port: number }>;
  command(port: number, ...args: Array<string | number>): Promise<Reply>;
  /**
   * Waits until every sentinel names `primaryPort` as the primary, knows the two other sentinels
   * and a replica, and has a quorum; with `replicaUp` (the default), also until a replica is in sync.
   */
  waitUntilAgreed(primaryPort: number, options?: { replicaUp?: boolean; timeoutMs?: number }): Promise<void>;
  /** Kills every process and removes their directories. */
  stop(): Promise<void>;
}

export interface SentinelOptions {
  /**
   * How long the primary may be unreachable before the sentinels call it down.
   * @default 1000
   */
  readonly downAfterMs?: number;
}

/** Starts a primary, a replica of it, and three sentinels with a quorum of 2; waits until they agree. */
export async function startSentinel(options: SentinelOptions = {}): Promise<SentinelDeployment> {
  requireRedisBinary(SERVER_FAMILY.sentinel);
  const name = 'sluice';
  const downAfterMs = options.downAfterMs ?? 1000;
  const started: RedisServer[] = [];
  const configDir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-'));
  const stop = async (): Promise<void> => {
    await Promise.all(started.map((server) => server.stop()));
    rmSync(configDir, { recursive: true, force: true });
  };
  const command = (port: number, ...args: Array<string | number>): Promise<Reply> => redisCommand(port, args);
  try {
    const primary = await startRedis({ args: ['--repl-diskless-sync-delay', '0'] });
    started.push(primary);
    const replica = await startRedis({
      args: ['--replicaof', '127.0.0.1', String(primary.port), '--repl-diskless-sync-delay', '0'],
    });
    started.push(replica);
    const sentinels = await Promise.all(
      [0, 1, 2].map(async (index) => {
        const configFile = join(configDir, `sentinel-${index}.conf`);
        writeFileSync(
          configFile,
          [
            `sentinel monitor ${name} 127.0.0.1 ${primary.port} 2`,
            `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
            `sentinel failover-timeout ${name} ${Math.max(downAfterMs * 4, 2000)}`,
            `sentinel parallel-syncs ${name} 1`,
            '',
          ].join('\n'),
        );
        const sentinel = await startRedis({ binary: SERVER_FAMILY.sentinel, configFile });
        started.push(sentinel);
        return sentinel;
      }),
    );
    const deployment: SentinelDeployment = {
      name,
      servers: [primary, replica],
      sentinels,
      sentinelNodes: sentinels.map((sentinel) => ({ host: sentinel.host, port: sentinel.port })),
      command,
      async waitUntilAgreed(primaryPort, { replicaUp = true, timeoutMs = 30_000 } = {}) {
        await pollUntil(
          `the sentinels to agree on the primary on port ${primaryPort}`,
          async () => {
            for (const sentinel of sentinels) {
              const address = (await command(sentinel.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as
                | string[]
                | null;
              if (address?.[1] !== String(primaryPort)) return undefined;
              const fields = (await command(sentinel.port, 'SENTINEL', 'MASTER', name)) as string[];
              const master: Record<string, string> = {};
              for (let i = 0; i + 1 < fields.length; i += 2)
                master[fields[i] as string] = fields[i + 1] as string;
              if (master.flags !== 'master' || master['num-other-sentinels'] !== '2') return undefined;
              if (Number(master['num-slaves']) < 1) return undefined;
              if (typeof (await command(sentinel.port, 'SENTINEL', 'CKQUORUM', name)) !== 'string')
                return undefined;
            }
            const role = infoFields(await command(primaryPort, 'INFO', 'replication'));
            if (role.role !== 'master') return undefined;
            if (replicaUp && !/state=online/.test(role.slave0 ?? '')) return undefined;
            return true;
          },
          timeoutMs,
        );
      },
      stop,
    };
    await deployment.waitUntilAgreed(primary.port);
    return deployment;
  } catch (error) {
    await stop();
    throw error;
  }
}
