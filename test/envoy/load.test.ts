// The largest requests the bounds take, sent back to back for 5 s, while a second client makes single-descriptor
// calls: the second client's calls are answered between the large ones. Its latencies, the service's event-loop
// delay and its memory are reported (t.diagnostic), not asserted: the machine is shared.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { EnvoyClient, type EnvoyServe, httpCall, OK, startEnvoyServe } from '../helpers/envoy/support.js';
import { CONFIG, largestRequest, user, wireBytes } from './bounds-support.js';

const LOOP_MS = 5000;

/** The resident memory of a process, in MB, from /proc. */
function residentMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

/** A gauge's value in a Prometheus text scrape. */
function gauge(text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

describe('the largest allowed requests, back to back, beside a second client', () => {
  let serve: EnvoyServe;
  let second: EnvoyClient;
  before(async () => {
    serve = await startEnvoyServe(CONFIG);
    second = new EnvoyClient(serve.grpc);
  });
  after(async () => {
    second.close();
    await serve.stop();
  });

  test('the second client is answered between the large requests', async (t) => {
    const large = largestRequest();
    assert.ok(wireBytes(large) <= 65_536 && wireBytes(large) > 60_000);
    const pid = serve.running.child.pid as number;
    // Warm up both paths, then take the memory and reset the event-loop histogram (read on each scrape).
    for (let i = 0; i < 20; i++) await serve.client.shouldRateLimit(large);
    for (let i = 0; i < 200; i++)
      await second.shouldRateLimit({ domain: 'bounds', descriptors: [user(`w${i}`)] });
    const memoryBefore = residentMb(pid);
    await httpCall(`${serve.http}/metrics`);

    const order: ('large' | 'small')[] = [];
    const smallMs: number[] = [];
    const until = performance.now() + LOOP_MS;
    const largeLoop = (async () => {
      while (performance.now() < until) {
        const response = await serve.client.shouldRateLimit(large);
        assert.equal(response.overall_code, OK);
        order.push('large');
      }
    })();
    let running = true;
    const smallLoop = (async () => {
      for (let i = 0; running; i++) {
        const started = performance.now();
        await second.shouldRateLimit({ domain: 'bounds', descriptors: [user(`s${i % 500}`)] });
        smallMs.push(performance.now() - started);
        order.push('small');
      }
    })();
    await largeLoop;
    running = false;
    await smallLoop;
    // One scrape: each one resets the event-loop histogram.
    const scraped = (await httpCall(`${serve.http}/metrics`)).body;
    const loopP99 = gauge(scraped, 'nodejs_eventloop_lag_p99_seconds');
    const loopMax = gauge(scraped, 'nodejs_eventloop_lag_max_seconds');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const memoryAfter = residentMb(pid);

    const larges = order.filter((item) => item === 'large').length;
    // The longest run of large answers with no small one between them.
    let run = 0;
    let longestRun = 0;
    for (const item of order) {
      run = item === 'large' ? run + 1 : 0;
      longestRun = Math.max(longestRun, run);
    }
    const sorted = [...smallMs].sort((a, b) => a - b);
    t.diagnostic(
      `${larges} large requests (${wireBytes(large)} bytes, 64 descriptors of 32 entries) in ${LOOP_MS} ms; ` +
        `${smallMs.length} small calls beside them: p50 ${percentile(sorted, 50).toFixed(2)} ms, ` +
        `p99 ${percentile(sorted, 99).toFixed(2)} ms, max ${(sorted.at(-1) ?? 0).toFixed(2)} ms; ` +
        `service event-loop delay p99 ${(loopP99 * 1000).toFixed(2)} ms, max ${(loopMax * 1000).toFixed(2)} ms; ` +
        `memory ${memoryBefore.toFixed(0)} MB before, ${memoryAfter.toFixed(0)} MB after`,
    );
    assert.ok(larges > 0);
    assert.ok(smallMs.length >= larges, `${smallMs.length} small calls for ${larges} large ones`);
    assert.ok(longestRun <= 2, `${longestRun} large answers in a row with no small one between them`);
  });
});
