// The large-request client of load.test.ts, in a worker thread: its encoding of 64 KiB messages must not delay the
// second client's measurements on the test's own thread. Sends the request back to back until `untilMs`.
import { parentPort, workerData } from 'node:worker_threads';
import { EnvoyClient, OK, type RateLimitRequest } from '../helpers/envoy/client.js';

const { address, request, untilMs } = workerData as {
  address: string;
  request: RateLimitRequest;
  untilMs: number;
};

const client = new EnvoyClient(address);
/** When each large answer arrived, on the clock both threads share (ms since the epoch, fractional). */
const answeredAt: number[] = [];
let refused = 0;
while (performance.timeOrigin + performance.now() < untilMs) {
  const response = await client.shouldRateLimit(request);
  if (response.overall_code !== OK) refused++;
  answeredAt.push(performance.timeOrigin + performance.now());
}
client.close();
parentPort?.postMessage({ answeredAt, refused });
