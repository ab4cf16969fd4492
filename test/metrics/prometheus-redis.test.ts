// prometheusMetrics() on a real Redis through an outage: decisions go to the failure policy, sluice_store_up goes 0 and back to 1.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { createLimiter, type FailureMode, fixedWindow, RedisStore } from '../../src/index.js';
import { prometheusMetrics } from '../../src/metrics/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { histogram, outcomes, scrape, skipped } from '../helpers/metrics/scrape.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clearOfWindowEnd } from '../helpers/window.js';

/** Waits until the client answers again after a restart (it reconnects on its own backoff). */
async function reconnected(connected: Connected): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      await connected.command('PING');
      return;
    } catch {
      await sleep(50);
    }
  }
  throw new Error('the client did not reconnect within 10 s');
}

describe('prometheusMetrics on Redis', () => {
  let server: RedisServer;
  let connected: Connected;
  let admin: Connected;

  before(async () => {
    server = await startRedis();
    connected = await connect('ioredis', server.port);
  });
  after(async () => {
    await connected.close();
    await admin?.close();
    await server.stop();
  });

  test('a killed server sends decisions to each failure policy and sluice_store_up to 0; a restart brings it back to 1', async () => {
    // The fallback store counts 'outage-user' to its limit of 2 in the hour's window (on Date.now()): it must not
    // end meanwhile (the outage, the restart and the reconnection included).
    await clearOfWindowEnd(3_600_000, 30_000);
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const store = new RedisStore({ client: connected.client, prefix: 'metrics' });
    const make = (name: string, onStoreError: FailureMode) =>
      createLimiter({
        store,
        policy: fixedWindow({ limit: 2, windowMs: 3_600_000 }),
        name,
        onStoreError,
        timeoutMs: 1000,
        metrics,
      });
    const limiters = {
      open: make('open', 'allow'),
      closed: make('closed', 'deny'),
      local: make('local', 'fallback'),
    };
    const names = Object.keys(limiters) as Array<keyof typeof limiters>;

    for (const limiter of Object.values(limiters)) await limiter.limit('before');
    let scraped = await scrape(registry);
    for (const name of names) {
      assert.deepEqual(outcomes(scraped, name), [1, 0, 0]);
      assert.equal(histogram(scraped, name).count, 1, 'one store decision, timed');
      assert.equal(scraped.value(`sluice_store_up{limiter="${name}"}`), 1);
    }

    await server.kill('SIGKILL');
    // One after the other, each call is the probe: it fails, and the failure policy answers.
    for (const limiter of Object.values(limiters)) {
      for (let i = 0; i < 4; i++) await limiter.limit('outage-user');
    }
    scraped = await scrape(registry);
    for (const name of names) assert.equal(scraped.value(`sluice_store_up{limiter="${name}"}`), 0, name);
    // Failing open: four allowed; closed: four denied; falling back: the in-process store allows 2 of 4.
    assert.deepEqual(outcomes(scraped, 'open'), [5, 0, 0]);
    assert.deepEqual(outcomes(scraped, 'closed'), [1, 4, 0]);
    assert.deepEqual(outcomes(scraped, 'local'), [3, 2, 0]);
    const [openTimeouts, openErrors, openSkipped, openFallback] = skipped(scraped, 'open');
    assert.equal((openTimeouts as number) + (openErrors as number), 4);
    assert.deepEqual([openSkipped, openFallback], [0, 0]);
    assert.deepEqual(skipped(scraped, 'local').slice(2), [0, 4], 'the fallback store decided all four');
    for (const name of names)
      assert.equal(histogram(scraped, name).count, 1, 'failed calls are not store decisions');
    // A policy that denies everyone names no one; the fallback's own denials do.
    assert.deepEqual(metrics.topDenied('closed'), []);
    assert.deepEqual(metrics.topDenied('local'), [{ identifier: 'outage-user', count: 2, error: 0 }]);

    // Calls at once while the server is down: one probes, the others are answered without asking.
    await Promise.all(Array.from({ length: 10 }, () => limiters.open.limit('burst')));
    scraped = await scrape(registry);
    const [timeouts, errors, skippedCalls] = skipped(scraped, 'open');
    assert.equal((timeouts as number) + (errors as number) + (skippedCalls as number), 14);
    assert.ok((skippedCalls as number) >= 1, 'calls behind the probe were skipped');
    assert.deepEqual(outcomes(scraped, 'open'), [15, 0, 0]);

    await server.restart();
    await reconnected(connected);
    for (const limiter of Object.values(limiters)) await limiter.limit('after');
    scraped = await scrape(registry);
    for (const name of names) {
      assert.equal(scraped.value(`sluice_store_up{limiter="${name}"}`), 1, name);
      assert.equal(histogram(scraped, name).count, 2, 'the store decides and is timed again');
    }
    assert.deepEqual(outcomes(scraped, 'local'), [4, 2, 0]);
  });

  test('a server that does not answer within timeoutMs counts as timeout, and store_up recovers with the next answer', async () => {
    admin = await connect('ioredis', server.port);
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const limiter = createLimiter({
      store: new RedisStore({ client: connected.client, prefix: 'metrics' }),
      policy: fixedWindow({ limit: 100, windowMs: 3_600_000 }),
      name: 'slow',
      // Generous, so that a loaded machine does not time out the calls that are meant to be answered.
      timeoutMs: 2000,
      metrics,
    });
    await limiter.limit('warm');
    // The server holds scripts until told to go on (WRITE pauses scripts, not CLIENT UNPAUSE): the
    // call runs out of time, however slow the machine, and fails open.
    await admin.command('CLIENT', 'PAUSE', 60_000, 'WRITE');
    const late = await limiter.limit('paused');
    await admin.command('CLIENT', 'UNPAUSE');
    assert.equal(late.reason, 'timeout');
    let scraped = await scrape(registry);
    assert.deepEqual(skipped(scraped, 'slow'), [1, 0, 0, 0]);
    assert.equal(scraped.value('sluice_store_up{limiter="slow"}'), 0);
    assert.equal((await limiter.limit('resumed')).reason, undefined);
    scraped = await scrape(registry);
    assert.equal(scraped.value('sluice_store_up{limiter="slow"}'), 1);
    assert.deepEqual(outcomes(scraped, 'slow'), [3, 0, 0]);
  });
});
