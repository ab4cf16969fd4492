// `<cli> --cluster reshard` on a test cluster: started once the nodes agree, and resumed after Valkey's NOREPLICAS.
import { execFile } from 'node:child_process';
import { promisify, stripVTControlCharacters } from 'node:util';
import type { ClusterNode, RedisCluster } from './redis-cluster.js';
import type { Reply } from './resp.js';
import { SERVER_FAMILY } from './server-family.js';

const run = promisify(execFile);

/**
 * How long the SETSLOTs that finish a slot let the primary wait for its replicas. Valkey 8 replicates every
 * CLUSTER SETSLOT to the replicas first and answers NOREPLICAS when they have not acknowledged it within
 * 2 s, the default `<cli> --cluster reshard` cannot change; a replica starved of CPU on a busy machine can take
 * longer.
 */
const SETSLOT_TIMEOUT_MS = 30_000;

/** The reshards `reshard` runs at most: the first, and one after each NOREPLICAS it resumed from. */
const ATTEMPTS = 4;

/**
 * `redis-cli --cluster reshard` (or valkey-cli's): moves the `count` lowest slots of primary `fromId` to
 * `toId`, as the cli plans them. Waits first until the cluster is healthy and every node agrees on the slots,
 * which the cli checks before it moves anything. On Valkey, a slot whose SETSLOT a replica did not acknowledge in
 * time (NOREPLICAS) is finished by hand with a longer wait, and the cli moves the slots still left.
 */
export async function reshard(
  cluster: RedisCluster,
  fromId: string,
  toId: string,
  count: number,
  viaPort: number,
): Promise<void> {
  await cluster.waitUntilHealthy();
  const source = await nodeById(cluster, fromId);
  const planned = ownedSlots(source).slice(0, count);
  for (let attempt = 1; ; attempt++) {
    const left = ownedSlots(await nodeById(cluster, fromId)).filter((slot) => planned.includes(slot));
    if (left.length === 0) return;
    const args = [
      '--cluster',
      'reshard',
      `${cluster.host}:${viaPort}`,
      '--cluster-from',
      fromId,
      '--cluster-to',
      toId,
      '--cluster-slots',
      String(left.length),
      '--cluster-yes',
      // Small batches keep the slots in MIGRATING/IMPORTING long enough for ASK redirections.
      '--cluster-pipeline',
      '1',
    ];
    let said: string;
    try {
      await run(SERVER_FAMILY.cli, args);
      return;
    } catch (error) {
      said = cliOutput(error);
    }
    const failure = `${SERVER_FAMILY.cli} ${args.join(' ')} failed (attempt ${attempt} of ${ATTEMPTS}): ${said}`;
    // The cli prints "Moving slot <n> from ..." before it opens slot n; the last one is the slot it left.
    const slot = Number([...said.matchAll(/Moving slot (\d+) from \S+:\d+ to/g)].at(-1)?.[1]);
    const noReplicas = /MoveSlot failed: NOREPLICAS/.test(said);
    if (!noReplicas || Number.isNaN(slot) || attempt === ATTEMPTS) throw new Error(failure);
    console.log(`reshard: resuming after NOREPLICAS on slot ${slot}: ${failure}`);
    await finishSlot(cluster, slot, fromId, toId);
    await cluster.waitUntilHealthy();
  }
}

/**
 * Moves `slot` from `fromId` to `toId` the way `--cluster reshard` does, wherever the cli stopped: opens it on
 * both sides (again), moves what keys are left, and assigns it to the target on every primary, the target
 * first. Each SETSLOT waits up to SETSLOT_TIMEOUT_MS for the replicas; a step already taken is skipped.
 */
async function finishSlot(cluster: RedisCluster, slot: number, fromId: string, toId: string): Promise<void> {
  const target = await nodeById(cluster, toId, toId);
  const source = await nodeById(cluster, fromId, fromId);
  const expectOk = (what: string, reply: Reply, acceptable?: RegExp): void => {
    if (reply === 'OK') return;
    if (reply instanceof Error && acceptable?.test(reply.message)) return;
    throw new Error(`Finishing slot ${slot} after NOREPLICAS: ${what} answered ${String(reply)}`);
  };
  const setSlot = (node: ClusterNode, ...args: string[]): Promise<Reply> =>
    cluster.command(node.port, 'CLUSTER', 'SETSLOT', slot, ...args, 'TIMEOUT', SETSLOT_TIMEOUT_MS);
  // Each node's own view decides: it is the one that accepts or refuses the command.
  if (!ownedSlots(target).includes(slot)) {
    expectOk(`IMPORTING on ${target.port}`, await setSlot(target, 'IMPORTING', fromId));
  }
  if (ownedSlots(source).includes(slot)) {
    // Gossip from the target may have taken the slot from the source since its view was read.
    expectOk(`MIGRATING on ${source.port}`, await setSlot(source, 'MIGRATING', toId), /not the owner/);
    for (;;) {
      const keys = await cluster.command(source.port, 'CLUSTER', 'GETKEYSINSLOT', slot, 100);
      if (!Array.isArray(keys))
        throw new Error(`GETKEYSINSLOT ${slot} on ${source.port} answered ${String(keys)}`);
      if (keys.length === 0) break;
      const migrate = ['MIGRATE', cluster.host, target.port, '', 0, 5000, 'KEYS', ...(keys as string[])];
      const moved = await cluster.command(source.port, ...migrate);
      // NOKEY: the keys expired or were deleted meanwhile.
      if (moved !== 'NOKEY') expectOk(`MIGRATE to ${target.port}`, moved);
    }
  }
  expectOk(`NODE on ${target.port}`, await setSlot(target, 'NODE', toId));
  const others = (await cluster.topology(target.port)).filter(
    (node) => node.role === 'primary' && !node.failed && node.id !== toId,
  );
  // The source first, as the cli informs it: then the others.
  others.sort((a, b) => Number(b.id === fromId) - Number(a.id === fromId));
  for (const node of others) expectOk(`NODE on ${node.port}`, await setSlot(node, 'NODE', toId));
}

/** The node `id` as `viewId` (by default the first live node) sees it. */
async function nodeById(cluster: RedisCluster, id: string, viewId?: string): Promise<ClusterNode> {
  let nodes = await cluster.topology();
  if (viewId !== undefined) {
    const port = nodes.find((node) => node.id === viewId)?.port;
    if (port !== undefined) nodes = await cluster.topology(port);
  }
  const node = nodes.find((candidate) => candidate.id === id);
  if (node === undefined) throw new Error(`No cluster node ${id}`);
  return node;
}

/** Every slot `node` serves, in ascending order: how the cli picks the slots it moves. */
function ownedSlots(node: ClusterNode): number[] {
  return node.slots
    .flatMap(([first, last]) => Array.from({ length: last - first + 1 }, (_, offset) => first + offset))
    .sort((a, b) => a - b);
}

/**
 * What a failed `<cli> --cluster` command said. It prints its reasons ("[ERR] Nodes don't agree about
 * configuration!", "clusterManagerMoveSlot failed: NOREPLICAS ...") on stdout and only a last line on stderr,
 * which is all execFile's message carries; the dots it prints per key moved are shortened.
 */
function cliOutput(error: unknown): string {
  const { code, signal, stdout, stderr } = error as {
    code?: unknown;
    signal?: unknown;
    stdout?: unknown;
    stderr?: unknown;
  };
  // The cli colours its errors.
  const said = stripVTControlCharacters(`${String(stdout ?? '')}\n${String(stderr ?? '')}`)
    .replace(/\.{2,}/g, '…')
    .split('\n')
    .filter((line) => line.trim() !== '');
  return `exit ${String(signal ?? code)}\n${said.slice(-60).join('\n')}`;
}
