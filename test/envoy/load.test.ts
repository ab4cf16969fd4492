// The largest requests the bounds take, sent back to back for 5 s (from a worker thread), while a second client makes
// single-descriptor calls: the second client's calls are answered between the large ones. Its latencies, the service's event-loop
// delay and its memory are reported (t.diagnostic), not asserted: the machine is shared.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { EnvoyClient, type EnvoyServe, httpCall, startEnvoyServe } from '../helpers/envoy/support.js';
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

/** The heap in use, in MB, from a scrape. */
function heapMb(text: string): number {
  return gauge(text, 'nodejs_heap_size_used_bytes') / 1024 / 1024;
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
    const memoryBefore = {
      resident: residentMb(pid),
      heap: heapMb((await httpCall(`${serve.http}/metrics`)).body),
    };

    // The large requests come from a worker thread; this thread is the second client.
    const startAt = performance.timeOrigin + performance.now();
    const worker = new Worker(new URL('./load-worker.js', import.meta.url), {
      workerData: { address: serve.grpc, request: large, untilMs: startAt + LOOP_MS },
    });
    const largeDone = new Promise<{ answeredAt: number[]; refused: number }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    let running = true;
    const smallAt: number[] = [];
    const smallMs: number[] = [];
    const smallLoop = (async () => {
      for (let i = 0; running; i++) {
        const started = performance.now();
        await second.shouldRateLimit({ domain: 'bounds', descriptors: [user(`s${i % 500}`)] });
        smallMs.push(performance.now() - started);
        smallAt.push(performance.timeOrigin + performance.now());
      }
    })();
    const { answeredAt: largeAt, refused } = await largeDone;
    running = false;
    await smallLoop;
    await worker.terminate();
    // One scrape: each one resets the event-loop histogram.
    const scraped = (await httpCall(`${serve.http}/metrics`)).body;
    const loopP99 = gauge(scraped, 'nodejs_eventloop_lag_p99_seconds');
    const loopMax = gauge(scraped, 'nodejs_eventloop_lag_max_seconds');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const memoryAfter = {
      resident: residentMb(pid),
      heap: heapMb((await httpCall(`${serve.http}/metrics`)).body),
    };

    const larges = largeAt.length;
    const first = largeAt[0] ?? 0;
    const last = largeAt.at(-1) ?? 0;
    // Answered while the large requests were being answered: not held until they stopped.
    const smallBetween = smallAt.filter((at) => at > first && at < last).length;
    // The longest run of large answers with no small one between them (reported).
    let longestRun = 0;
    let small = 0;
    let run = 0;
    for (const at of largeAt) {
      let between = false;
      while (small < smallAt.length && (smallAt[small] as number) < at) {
        small++;
        between = true;
      }
      run = between ? 1 : run + 1;
      longestRun = Math.max(longestRun, run);
    }
    const sorted = [...smallMs].sort((a, b) => a - b);
    t.diagnostic(
      `${larges} large requests (${wireBytes(large)} bytes, 64 descriptors of 32 entries) in ${LOOP_MS} ms; ` +
        `${smallMs.length} small calls beside them (${smallBetween} answered between the first and last large answer; ` +
        `at most ${longestRun} large answers in a row without one): p50 ${percentile(sorted, 50).toFixed(2)} ms, ` +
        `p99 ${percentile(sorted, 99).toFixed(2)} ms, max ${(sorted.at(-1) ?? 0).toFixed(2)} ms; ` +
        `service event-loop delay p99 ${(loopP99 * 1000).toFixed(2)} ms, max ${(loopMax * 1000).toFixed(2)} ms; ` +
        `resident memory ${memoryBefore.resident.toFixed(0)} MB before, ${memoryAfter.resident.toFixed(0)} MB 1 s after; ` +
        `heap in use ${memoryBefore.heap.toFixed(1)} MB before, ${memoryAfter.heap.toFixed(1)} MB after`,
    );
    assert.equal(refused, 0);
    assert.ok(larges > 0);
    assert.ok(smallBetween >= larges, `${smallBetween} small calls answered among ${larges} large ones`);
  });
});
