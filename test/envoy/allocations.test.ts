// What one ShouldRateLimit call allocates in the service's own code, in bytes (not in time, which a
// shared machine cannot hold still): the request read from its bytes, resolved, decided on the memory
// store and framed, in process and without node:http2. Under overload every byte a call allocates is
// garbage collection that delays the calls open meanwhile. Measured on Node.js 20, 22, 24 and 26 (least
// of five rounds of 500 calls, with the loop that makes the calls; 2026-12-08): one descriptor 3.9-4.1
// KB, two 13.0-14.5 KB, against 8.0-8.8 and 18.0-20.0 KB when the request passed through four async
// functions of its own and the answer through arrays made per call.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

const SCRIPT = `
const [base, descriptorCount] = process.argv.slice(1);
const { EnvoyService } = await import(base + 'service.js');
const { buildConfig } = await import(base + 'config.js');
const { decodeRequest } = await import(base + 'request-codec.js');
const { framedResponse } = await import(base + 'response-codec.js');
const { loadServices } = await import(base + 'grpc.js');
const { envoyMetrics } = await import(base + 'metrics.js');
const { DEFAULT_BOUNDS } = await import(base + 'bounds.js');
const { MemoryStore } = await import('sluice');
const { Registry } = await import('prom-client');
const v8 = await import('node:v8');
const text = [
  'domain: load',
  'descriptors:',
  '  - key: user',
  '    rate_limit: { unit: minute, requests_per_unit: 1000000000 }',
  '  - key: path',
  '    rate_limit: { unit: minute, requests_per_unit: 1000000000 }',
].join('\\n');
const metrics = await envoyMetrics(new Registry());
const service = new EnvoyService({
  store: new MemoryStore(), oneShard: true, shadow: false, quotaMode: false, headers: false,
  metadata: false, bounds: DEFAULT_BOUNDS, metrics, log: () => {},
});
service.load(buildConfig([{ file: 'load.yaml', text }]));
const method = loadServices().shouldRateLimit;
const keys = ['user', 'path'].slice(0, Number(descriptorCount));
// Requests as a proxy sends them: a value per caller, read from its bytes on every call.
const requests = Array.from({ length: 1000 }, (_, i) =>
  Buffer.from(method.requestSerialize({
    domain: 'load',
    descriptors: keys.map((key) => ({ entries: [{ key, value: key + i }] })),
  })),
);
let framed = 0;
// A turn of the event loop every 500 calls, as a server's: the limiter's deadlines restart their
// clocks in the check phase, and hold the calls of the turn until then.
const turn = () => new Promise((resolve) => setImmediate(resolve));
const run = async (n) => {
  for (let i = 0; i < n; i++) {
    const done = metrics.call('ShouldRateLimit');
    const response = await service.shouldRateLimit(decodeRequest(requests[i % 1000]));
    done();
    framed += framedResponse(response).length;
    if (i % 500 === 499) await turn();
  }
};
const young = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_used_size;
await run(20_000);
// Rounds short enough that no collection runs within one (a collection would only lower a round's count).
const rounds = [];
for (let r = 0; r < 5; r++) {
  globalThis.gc();
  const before = young();
  await run(500);
  rounds.push((young() - before) / 500);
}
process.stdout.write(String(framed > 0 ? Math.min(...rounds) : Number.NaN));
`;

function measure(descriptors: number): number {
  const out = execFileSync(
    process.execPath,
    [
      '--expose-gc',
      '--min-semi-space-size=64',
      '--max-semi-space-size=64',
      '--input-type=module',
      '-e',
      SCRIPT,
      new URL('../../packages/server/src/envoy/', import.meta.url).href,
      String(descriptors),
    ],
    { encoding: 'utf8' },
  );
  return Number(out);
}

/** Bytes per call, the least of three processes: what else a process allocates meanwhile only adds. */
function bytesPerCall(descriptors: number): number {
  return Math.min(measure(descriptors), measure(descriptors), measure(descriptors));
}

test('a ShouldRateLimit call of one descriptor allocates at most 5.5 KB in the service, two at most 16.5 KB', (t) => {
  // An async function on the call's path costs about 1 KB a call (its frame, its promise and the
  // reactions of what it awaits): four of them are the difference between before and now.
  const one = bytesPerCall(1);
  const two = bytesPerCall(2);
  t.diagnostic(`bytes per call: one descriptor ${one.toFixed(0)}, two ${two.toFixed(0)}`);
  assert.ok(one > 0 && one <= 5_500, `one descriptor: ${one.toFixed(0)} bytes per call`);
  assert.ok(two > one && two <= 16_500, `two descriptors: ${two.toFixed(0)} bytes per call`);
});
