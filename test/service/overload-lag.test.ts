// The guard's loop-delay rule counts only the delay the service's own work made. A `sluice serve` stopped (SIGSTOP)
// for half a second while POST /v1/limit calls are in flight, then continued, refuses none and decides each exactly:
// the loop was late because the machine did not run the process, not because it had more work than it could do. The
// same service with its own loop kept busy by a counted, deliberately expensive load (test/helpers/loop-hog.ts)
// refuses the calls that arrive meanwhile, 503 and counted, though its concurrency limit is far from reached.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type ServeProcess, startServe, writeConfig } from '../helpers/cli.js';
import { metric } from '../helpers/envoy/support.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const LIMIT = 100;
/** Calls before the stop, and calls sent while the process is stopped. */
const BEFORE_STOP = 100;
const DURING_STOP = 150;
const BUSY_CALLS = 100;
/**
 * The loop-delay rule made quick to trip: behind by more than 10 ms for 100 ms, after one call, counts as overload.
 * The concurrency limit is held far above the calls sent, so that only the loop-delay rule can refuse.
 */
const LAG_TRIPS_EARLY = [
  ...['--shed-wait', '10ms', '--shed-burst', '100ms', '--shed-min', '1'],
  ...['--shed-limit', '5000', '--shed-max', '5000', '--shed-queue', '0'],
];
const HOG = fileURLToPath(new URL('../helpers/loop-hog.js', import.meta.url));

interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** One POST /v1/limit on a connection of its own. */
function limit(base: string, key: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const outgoing = request(`${base}/v1/limit`, { method: 'POST', agent: false }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }));
    });
    outgoing.on('error', reject);
    outgoing.end(JSON.stringify({ policy: 'api', key }));
  });
}

const calls = (base: string, key: string, count: number): Promise<Reply[]> =>
  Promise.all(Array.from({ length: count }, () => limit(base, key)));

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('the loop-delay rule counts the service’s own work only (memory store)', () => {
  let config: ReturnType<typeof writeConfig>;
  const started: ServeProcess[] = [];

  before(() => {
    config = writeConfig({
      policies: { api: { algorithm: 'fixedWindow', limit: LIMIT, windowMs: 3_600_000 } },
    });
  });
  after(async () => {
    for (const { running } of started) {
      running.child.kill('SIGCONT');
      running.child.kill('SIGTERM');
      await running.exited;
    }
    config.remove();
  });

  test(`stopped for 500 ms with ${BEFORE_STOP} calls in flight and ${DURING_STOP} sent meanwhile: none refused, exactly ${LIMIT} allowed`, async () => {
    // The service's memory store counts the 250 calls to exactly the limit in its hour window (on Date.now()).
    await clearOfWindowEnd(3_600_000, 30_000);
    const serve = await startServe(['--config', config.path, ...LAG_TRIPS_EARLY]);
    started.push(serve);
    const { child } = serve.running;
    const key = `stopped-${Date.now()}`;
    const first = calls(serve.base, key, BEFORE_STOP);
    child.kill('SIGSTOP');
    let second: Promise<Reply[]>;
    try {
      // Sent while the process is stopped: they wait in its sockets, read once it runs again, half a second late.
      second = calls(serve.base, key, DURING_STOP);
      await pause(500);
    } finally {
      child.kill('SIGCONT');
    }
    const replies = [...(await first), ...(await second)];
    assert.equal(replies.filter((reply) => reply.status === 503).length, 0, 'none refused');
    assert.equal(replies.filter((reply) => reply.status === 200).length, LIMIT);
    assert.equal(replies.filter((reply) => reply.status === 429).length, replies.length - LIMIT);
    for (const reply of replies) assert.equal(reply.body.reason, undefined, JSON.stringify(reply.body));
    assert.equal(await metric(serve.base, 'sluice_service_shed_total', { protocol: 'http' }), 0);
  });

  test(`its own loop kept busy by a counted load: the ${BUSY_CALLS} calls that arrive meanwhile are refused 503, counted`, async () => {
    const serve = await startServe(['--config', config.path, ...LAG_TRIPS_EARLY], {
      env: { NODE_OPTIONS: `--import=${HOG}` },
    });
    started.push(serve);
    const { running } = serve;
    // Three slices of the load have run (each at least its own CPU time on the wall clock): the loop has been behind
    // by its own work for longer than --shed-burst when the calls arrive, and stays so while they are read.
    running.child.kill('SIGUSR2');
    await running.waitFor(/hog busy/);
    const replies = await calls(serve.base, `busy-${Date.now()}`, BUSY_CALLS);
    running.child.kill('SIGUSR2');
    await running.waitFor(/hog idle/);
    const refused = replies.filter((reply) => reply.status === 503).length;
    const decided = replies.filter((reply) => reply.status === 200 || reply.status === 429).length;
    assert.equal(refused + decided, BUSY_CALLS, 'every call refused or decided');
    assert.ok(refused > 0, 'calls arriving while the loop is behind by its own work are refused');
    assert.equal(await metric(serve.base, 'sluice_service_shed_total', { protocol: 'http' }), refused);
    // Not the concurrency limit's doing: it stayed above every call sent.
    assert.ok((await metric(serve.base, 'sluice_service_shed_limit')) > BUSY_CALLS);
  });
});
