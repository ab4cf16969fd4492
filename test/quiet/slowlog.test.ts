// No limiter script would reach SLOWLOG after a worst-case workload: each call's server-side CPU time
// stays under SLOWLOG's threshold, and a deliberately slow script, measured the same way, crosses it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  gcra,
  RedisStore,
  SLIDING_LOG_MAX_LIMIT,
  slidingLog,
  slidingWindow,
} from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { scriptsInSlowlog } from '../helpers/suites.js';

/** About 100 ms of CPU on this machine (10 to 40 times the threshold on any current one). */
const SLOW_SCRIPT = 'local x = 0 for i = 1, 10000000 do x = x + i end return x';

let server: RedisServer;
let admin: Connected;
before(async () => {
  server = await startRedis();
  admin = await connect('ioredis', server.port);
});
after(async () => {
  await admin.close();
  await server.stop();
});

/**
 * CPU time of the server's main thread, in µs (INFO cpu). SLOWLOG measures wall time, which on a
 * loaded machine includes the time the server waited for a CPU; this counts only the time it ran.
 */
async function serverCpuUs(): Promise<number> {
  const info = String(await admin.command('INFO', 'cpu'));
  const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1]);
  const seconds = field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread');
  assert.ok(Number.isFinite(seconds), `no main-thread CPU in INFO cpu: ${info}`);
  return seconds * 1e6;
}

/** Server CPU per script call (µs) while `work` runs: its calls are one kind, so the mean is each one's. */
async function cpuPerCall(store: RedisStore, work: () => Promise<unknown>): Promise<number> {
  const callsBefore = store.calls;
  const before = await serverCpuUs();
  await work();
  const used = (await serverCpuUs()) - before;
  const calls = store.calls - callsBefore;
  assert.ok(calls > 0, 'the work made script calls');
  return used / calls;
}

describe('SLOWLOG', () => {
  test('no limiter script takes SLOWLOG threshold of server CPU in a worst-case workload; a slow script does', async (t) => {
    const threshold = Number(
      ((await admin.command('CONFIG', 'GET', 'slowlog-log-slower-than')) as string[])[1],
    );
    assert.equal(threshold, 10_000, 'the default threshold, in µs');
    const store = new RedisStore({ client: admin.client, prefix: 'slow' });
    const log = createLimiter({
      store,
      policy: slidingLog({ limit: SLIDING_LOG_MAX_LIMIT, windowMs: 60_000 }),
      name: 'log',
      timeoutMs: 60_000,
    });
    const batched = [
      log,
      createLimiter({
        store,
        policy: slidingWindow({ limit: 100, windowMs: 60_000 }),
        name: 'sw',
        timeoutMs: 60_000,
      }),
      createLimiter({ store, policy: gcra({ limit: 100, periodMs: 60_000 }), name: 'g', timeoutMs: 60_000 }),
    ];
    // The first call loads the scripts (compiling them all): not a decision's cost.
    await log.peek('warm');
    await admin.command('SLOWLOG', 'RESET');
    // Each kind of call five times: a log at the ceiling with the largest cost, one more unit on it,
    // the refund of the largest cost, and full coalesced batches (512 callers over 300 keys). Its
    // figure is the least of the five: a moment of contention for the CPU's caches can slow one call,
    // while a script that does too much work does it every time.
    const measured = new Map<string, number[]>();
    const measure = async (what: string, work: () => Promise<unknown>): Promise<void> => {
      const figures = measured.get(what) ?? [];
      figures.push(await cpuPerCall(store, work));
      measured.set(what, figures);
    };
    for (let round = 0; round < 5; round++) {
      const identifier = `full-${round}`;
      await measure('log: largest cost', () => log.limit(identifier, { cost: SLIDING_LOG_MAX_LIMIT }));
      await measure('log: one more, refused', () => log.limit(identifier));
      await measure('log: refund of the largest cost', () => log.refund(identifier, SLIDING_LOG_MAX_LIMIT));
      for (const limiter of batched) {
        await measure(`${limiter.name}: batches`, () =>
          Promise.all(Array.from({ length: 512 }, (_, i) => limiter.limit(`k${i % 300}`))),
        );
      }
    }
    // Reported, not asserted: wall time on a shared machine includes waits for the CPU.
    const inSlowlog = (await scriptsInSlowlog(admin)).length;

    // The control: the same measure sees a script that is slow, and SLOWLOG logs it.
    const before = await serverCpuUs();
    await admin.command('EVAL', SLOW_SCRIPT, 0);
    const slowUs = (await serverCpuUs()) - before;
    const slowLogged = (await scriptsInSlowlog(admin)).some((entry) =>
      String(((entry as unknown[])[3] as unknown[])[1]).startsWith('local x = 0'),
    );

    const least = [...measured].map(([what, figures]) => [what, Math.min(...figures)] as const);
    t.diagnostic(
      `SLOWLOG threshold ${threshold} µs; server CPU per limiter call, least of 5: ` +
        `${least.map(([what, us]) => `${what} ${us.toFixed(0)} µs`).join(', ')}; ` +
        `${inSlowlog} limiter calls in SLOWLOG by wall time; the slow script ${slowUs.toFixed(0)} µs`,
    );
    for (const [what, us] of least) {
      assert.ok(us < threshold, `${what}: ${us.toFixed(0)} µs of server CPU per call`);
    }
    assert.ok(slowUs > threshold, `the slow script took ${slowUs.toFixed(0)} µs of server CPU`);
    assert.ok(slowLogged, 'the slow script is in SLOWLOG');
  });
});
