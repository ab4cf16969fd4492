// Usage known after the fact, with the store down: a charge is never a failure policy's guess. It
// rejects with the store's error, and a settle that charges stays open to be retried; a settle that
// gives back leaves the estimate counted (the strict side).
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLimiter, ERROR_CODES, fixedWindow, RedisStore, type SluiceError } from '../../src/index.js';
import { connect } from '../helpers/clients.js';
import { startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

function failedStore(error: unknown): boolean {
  const code = (error as SluiceError).code;
  return code === ERROR_CODES.STORE || code === ERROR_CODES.TIMEOUT;
}

test('a charge the store cannot take rejects, and its reservation may be settled again once the store is back', async () => {
  // The reservations, and the settles retried through the outage, must fall in one hour's window.
  await clearOfWindowEnd(3_600_000, 30_000);
  const server = await startRedis();
  const connected = await connect('ioredis', server.port);
  const errors: SluiceError[] = [];
  const limiter = createLimiter({
    store: new RedisStore({ client: connected.client }),
    policy: fixedWindow({ limit: 1000, windowMs: 3_600_000 }),
    name: 'charge-outage',
    timeoutMs: 500,
    onError: (error) => errors.push(error),
  });
  try {
    // The first call loads the scripts; on a busy machine that may take longer than timeoutMs.
    while ((await limiter.peek('warm')).reason !== undefined);
    const charging = await limiter.reserve('u', { cost: 100 });
    const refunding = await limiter.reserve('u', { cost: 100 });
    assert.equal(refunding.decision.remaining, 800);
    await server.kill('SIGKILL');

    // onStoreError is 'allow', and still: a charge is not answered by the failure policy, not even
    // while the shard is known to be down and another call probes it.
    await assert.rejects(limiter.charge('u', 5), failedStore);
    const many = await Promise.allSettled(Array.from({ length: 10 }, () => limiter.charge('u', 1)));
    assert.deepEqual(
      many.map((outcome) => outcome.status),
      Array(10).fill('rejected'),
    );
    await assert.rejects(charging.settle(250), failedStore);
    assert.equal(charging.settled, false, 'a settle whose charge failed stays open');
    // A give-back the store did not record leaves the estimate counted, and says why.
    const refund = await refunding.settle(10);
    assert.ok(refund.reason === 'store-error' || refund.reason === 'timeout', String(refund.reason));
    assert.equal(refunding.settled, true);
    assert.ok(errors.length >= 13 && errors.every(failedStore), `onError heard ${errors.length}`);

    await server.restart();
    // The client reconnects on its own backoff; the retried settle records the charge.
    const deadline = performance.now() + 20_000;
    let settled: Awaited<ReturnType<typeof charging.settle>> | undefined;
    while (settled === undefined) {
      try {
        settled = await charging.settle(250);
      } catch (error) {
        assert.ok(failedStore(error));
        if (performance.now() > deadline) throw error;
        await sleep(50);
      }
    }
    assert.equal(charging.settled, true);
    // The restarted server (no persistence) holds the charged difference alone.
    assert.deepEqual([settled.remaining, settled.debt, settled.cutOff], [850, 0, 0]);
    await assert.rejects(
      charging.settle(250),
      (error: SluiceError) => error.code === ERROR_CODES.ALREADY_SETTLED,
    );
  } finally {
    await connected.close();
    await server.stop();
  }
});
