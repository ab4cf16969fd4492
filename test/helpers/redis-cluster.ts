// A real Redis Cluster on loopback: 6 server processes (3 primaries, 3 replicas; Redis or Valkey) for the cluster suites.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { type RedisServer, requireRedisBinary, startRedis } from './redis-server.js';
import { infoFields, pollUntil, type Reply, redisCommand } from './resp.js';
import { SERVER_FAMILY } from './server-family.js';

const run = promisify(execFile);

export interface ClusterNode {
  readonly id: string;
  readonly port: number;
  readonly role: 'primary' | 'replica';
  /** The primary's id, for a replica. */
  readonly primaryId: string | undefined;
  /** Slot ranges served, for a primary: [[first, last], ...]. */
  readonly slots: Array<[number, number]>;
  /** Slots this node is migrating or importing, as CLUSTER NODES lists them for the node it was asked of: `[5->-id]`, `[5-<-id]`. */
  readonly openSlots: string[];
  readonly failed: boolean;
}

export interface RedisCluster {
  readonly host: '127.0.0.1';
  /** Every node's server, in creation order; a killed one stays in the list. */
  readonly servers: readonly RedisServer[];
  /** `[{ host, port }]` of every node, as cluster clients take their seed list. */
  readonly rootNodes: ReadonlyArray<{ host: string; port: number }>;
  /** Sends one command to the node on `port`. */
  command(port: number, ...args: Array<string | number>): Promise<Reply>;
  /** The topology as the node on `port` (or the first live node) sees it. */
  topology(port?: number): Promise<ClusterNode[]>;
  /** The live primary that serves `slot`. */
  primaryOf(slot: number): Promise<ClusterNode>;
  /** The server listening on `port`. */
  server(port: number): RedisServer;
  /**
   * Waits until every live node reports `cluster_state:ok`, sees all slots served and agrees on the topology:
   * the same live primaries, the same owner for every slot, no slot left migrating or importing (what
   * `<cli> --cluster check` demands before a reshard), and every replica's link up.
   */
  waitUntilHealthy(timeoutMs?: number): Promise<void>;
  /** Kills every node and removes their directories. */
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /**
   * `cluster-node-timeout`: how long a node may be unreachable before its replica takes over.
   * @default 5000
   */
  readonly nodeTimeoutMs?: number;
  /** Extra redis-server arguments for every node. */
  readonly args?: readonly string[];
}

function parseNodes(text: string): ClusterNode[] {
  const nodes: ClusterNode[] = [];
  for (const line of text.trim().split('\n')) {
    const fields = line.trim().split(' ');
    const [id, address, flags = '', primaryId] = fields;
    if (id === undefined || address === undefined) continue;
    const port = Number(address.split('@')[0]?.split(':')[1]);
    const flagList = flags.split(',');
    const slots: Array<[number, number]> = [];
    const openSlots: string[] = [];
    for (const range of fields.slice(8)) {
      if (range.startsWith('[')) {
        openSlots.push(range); // a slot being migrated or imported
        continue;
      }
      const [first, last] = range.split('-').map(Number);
      if (first !== undefined) slots.push([first, last ?? first]);
    }
    nodes.push({
      id,
      port,
      role: flagList.includes('master') ? 'primary' : 'replica',
      primaryId: primaryId === '-' ? undefined : primaryId,
      slots,
      openSlots,
      failed: flagList.includes('fail') || flagList.includes('fail?') || flagList.includes('noaddr'),
    });
  }
  return nodes;
}

/** Who serves which slots, in one node's view: `id:first-last,...|...`, the same text for the same assignment. */
function slotOwners(nodes: readonly ClusterNode[]): string {
  return nodes
    .filter((node) => node.slots.length > 0)
    .map((node) => `${node.id}:${node.slots.map(([first, last]) => `${first}-${last}`).join(',')}`)
    .sort()
    .join('|');
}

function isAlive(server: RedisServer): boolean {
  return server.process.exitCode === null && server.process.signalCode === null;
}

/**
 * Starts 6 nodes in cluster mode, joins them with `<cli> --cluster create --cluster-replicas 1`,
 * and waits until the cluster is healthy. No persistence; diskless replication without delay, so
 * replicas sync at once.
 */
export async function startCluster(options: ClusterOptions = {}): Promise<RedisCluster> {
  requireRedisBinary(SERVER_FAMILY.cli);
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 5000;
  const args = [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    String(nodeTimeoutMs),
    // A replica may always take over, however long its link was down: the tests kill primaries.
    '--cluster-replica-validity-factor',
    '0',
    '--repl-diskless-sync',
    'yes',
    '--repl-diskless-sync-delay',
    '0',
    ...(options.args ?? []),
  ];
  const started = await Promise.allSettled(Array.from({ length: 6 }, () => startRedis({ args })));
  const servers = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((server) => server.stop()));
  };
  if (servers.length !== 6) {
    await stop();
    const failure = started.find((result) => result.status === 'rejected');
    throw new Error(`Could not start 6 cluster nodes: ${String(failure?.reason)}`);
  }
  const command = async (port: number, ...commandArgs: Array<string | number>): Promise<Reply> =>
    redisCommand(port, commandArgs);
  const firstLive = (): RedisServer => {
    const live = servers.find(isAlive);
    if (live === undefined) throw new Error('No cluster node is running');
    return live;
  };
  const topology = async (port = firstLive().port): Promise<ClusterNode[]> => {
    const reply = await command(port, 'CLUSTER', 'NODES');
    if (typeof reply !== 'string') throw new Error(`CLUSTER NODES on ${port} answered ${String(reply)}`);
    return parseNodes(reply);
  };
  const cluster: RedisCluster = {
    host: '127.0.0.1',
    servers,
    rootNodes: servers.map((server) => ({ host: server.host, port: server.port })),
    command,
    topology,
    async primaryOf(slot) {
      const nodes = await topology();
      const owner = nodes.find(
        (node) =>
          node.role === 'primary' &&
          !node.failed &&
          node.slots.some(([first, last]) => slot >= first && slot <= last),
      );
      if (owner === undefined) throw new Error(`No live primary serves slot ${slot}`);
      return owner;
    },
    server(port) {
      const server = servers.find((candidate) => candidate.port === port);
      if (server === undefined) throw new Error(`No cluster node on port ${port}`);
      return server;
    },
    async waitUntilHealthy(timeoutMs = 30_000) {
      await pollUntil(
        'a healthy cluster',
        async () => {
          const live = servers.filter(isAlive);
          const views = await Promise.all(
            live.map(async (server) => ({
              info: infoFields(await command(server.port, 'CLUSTER', 'INFO')),
              nodes: await topology(server.port),
            })),
          );
          for (const { info, nodes } of views) {
            if (info.cluster_state !== 'ok' || info.cluster_slots_ok !== '16384') return undefined;
            if (nodes.length !== servers.length) return undefined;
            // Every live node must see the same live primaries (gossip has converged).
            const primaries = nodes
              .filter((node) => node.role === 'primary' && !node.failed)
              .map((node) => node.id)
              .sort()
              .join();
            const reference = views[0]?.nodes
              .filter((node) => node.role === 'primary' && !node.failed)
              .map((node) => node.id)
              .sort()
              .join();
            if (primaries !== reference) return undefined;
          }
          // The same owner for every slot in every node's view, as `--cluster check` compares them: a node that
          // has not yet heard of a slot's new owner (gossip, after a migration or a failover) makes a reshard
          // refuse to start ("Nodes don't agree about configuration!").
          const owners = views.map(({ nodes }) => slotOwners(nodes));
          const disagreeing = live.filter((_, index) => owners[index] !== owners[0]);
          if (disagreeing.length > 0) {
            throw new Error(
              `nodes disagree about slot owners: ${live[0]?.port} sees ${owners[0]}; ${disagreeing
                .map((server) => `${server.port} sees ${owners[live.indexOf(server)]}`)
                .join('; ')}`,
            );
          }
          // Only a node's own line lists its open slots.
          const open = views.flatMap(({ nodes }) =>
            nodes
              .filter((node) => node.openSlots.length > 0)
              .map((node) => `${node.port} ${node.openSlots.join(' ')}`),
          );
          if (open.length > 0) throw new Error(`slots left open: ${open.join('; ')}`);
          // Replicas are in sync, so a failover has data to promote.
          for (const server of live) {
            const replication = infoFields(await command(server.port, 'INFO', 'replication'));
            if (replication.role === 'slave' && replication.master_link_status !== 'up') return undefined;
          }
          return true;
        },
        timeoutMs,
      );
    },
    stop,
  };
  try {
    await run(SERVER_FAMILY.cli, [
      '--cluster',
      'create',
      ...servers.map((server) => `${server.host}:${server.port}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ]);
    await cluster.waitUntilHealthy();
  } catch (error) {
    await stop();
    throw error;
  }
  return cluster;
}
