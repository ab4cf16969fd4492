// wait() across 4 processes on GCRA and the token bucket: slots are handed out in the order the calls
// reached the store (MONITOR's order), no call goes before its slot, and one store call per grant.
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LATE_SLOT_MS } from '../../src/core/waiting.js';
import { nextMessage } from '../helpers/child.js';
import { clientCommands, startMonitor } from '../helpers/monitor.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { unique } from '../helpers/suites.js';
import type { WaitWorkerConfig, WaitWorkerReport } from '../helpers/wait-worker.js';

const WORKER = fileURLToPath(new URL('../helpers/wait-worker.js', import.meta.url));
const PROCESSES = 4;
const CALLS = 12;

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

for (const algorithm of ['gcra', 'tokenBucket'] as const) {
  describe(`wait() from ${PROCESSES} processes, ${algorithm} of 50 per second, one at a time`, () => {
    test('slots go in the order the calls reached the store, none early, one store call per grant', async () => {
      // A process the machine stalls past a slot lets that slot go and takes a new one (a second store
      // call, by design): such a run proves nothing about the order, so it is run again, at most 3 times.
      for (let attempt = 1; ; attempt++) {
        const stalled = await orderRun(algorithm);
        if (stalled === undefined) return;
        assert.ok(attempt < 3, `the machine stalled a process past a slot in 3 runs of 3 (${stalled} ms)`);
      }
    });
  });
}

/** One run; undefined when it was checked, or the longest stall (ms) when a process stalled past a slot. */
async function orderRun(algorithm: 'gcra' | 'tokenBucket'): Promise<number | undefined> {
  const name = unique('order');
  const children = Array.from({ length: PROCESSES }, () => fork(WORKER, [], { stdio: 'inherit' }));
  const ready = children.map((child) => nextMessage(child, 'ready'));
  for (const child of children) {
    const config: WaitWorkerConfig = { port: server.port, name, algorithm, calls: CALLS };
    child.send(config);
  }
  await Promise.all(ready);
  const monitor = await startMonitor(server.port);
  const reported = children.map((child) => nextMessage(child, 'report'));
  for (const child of children) child.send('go');
  const reports = (await Promise.all(reported)) as WaitWorkerReport[];
  await monitor.stop();
  const stalledMs = Math.max(...reports.map((report) => report.stalledMs));
  if (stalledMs > LATE_SLOT_MS) return Math.round(stalledMs);

  const scripts = clientCommands(monitor).filter((command) => /^EVALSHA|^EVAL$/i.test(command.args[0] ?? ''));
  const grants = reports.reduce((sum, report) => sum + report.resolved.filter((r) => r.allowed).length, 0);
  assert.equal(grants, PROCESSES * CALLS, 'every call was granted');
  const perGrant = scripts.length / grants;
  assert.ok(perGrant <= 1.1, `${scripts.length} script calls for ${grants} grants`);

  // Each process's calls in the order its connection sent them, as MONITOR saw them run: the
  // slot of each is the server's time then plus the wait the store gave it.
  const next = new Map(reports.map((report) => [report.address, 0]));
  const slots = scripts
    .filter((command) => command.args[0]?.toUpperCase() === 'EVALSHA')
    .map((command) => {
      const report = reports.find((r) => r.address === command.source) as WaitWorkerReport;
      const index = next.get(command.source) as number;
      next.set(command.source, index + 1);
      const waitMs = report.waits[index] as number;
      return { worker: reports.indexOf(report), index, slotMs: command.atMs + waitMs };
    });
  assert.equal(slots.length, grants);
  for (let i = 1; i < slots.length; i++) {
    const [earlier, later] = [slots[i - 1], slots[i]] as [(typeof slots)[0], (typeof slots)[0]];
    assert.ok(later.slotMs > earlier.slotMs, `the call that reached the store ${i + 1}th got a later slot`);
  }
  // Calls of different processes interleave at the store: the order is the fleet's, not each process's.
  assert.ok(new Set(slots.map((slot) => slot.worker)).size === PROCESSES, 'every process was granted');
  for (const slot of slots) {
    const resolved = (reports[slot.worker] as WaitWorkerReport).resolved[slot.index];
    const early = slot.slotMs - (resolved?.atMs ?? 0);
    assert.ok(early <= 1, `a call went ${early.toFixed(2)} ms before its slot`);
  }
  return undefined;
}
