// throttle({ concurrency }) on Redis: at most `limit` calls run at once, each lease released when its
// call returns or throws, renewed while it runs past half its length; a bad `concurrency` is refused.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { askSlot, limiterPipeline, type Pipeline } from '../../src/core/index.js';
import { concurrency, createLimiter, ERROR_CODES, gcra, type Limiter, RedisStore } from '../../src/index.js';
import { throttle } from '../../src/throttle/index.js';
import { isCode } from '../helpers/errors.js';
import { redisForSuite, unique } from '../helpers/suites.js';

const suite = redisForSuite();

/** A rate that is never the bottleneck here, so that only the concurrency limiter holds calls back. */
function fastRate(): Limiter {
  const store = new RedisStore({ client: suite.redis.client });
  return createLimiter({
    store,
    policy: gcra({ limit: 1000, periodMs: 1000, burst: 20 }),
    name: unique('rate'),
  });
}

function slots(limit: number, leaseMs: number): Limiter {
  const store = new RedisStore({ client: suite.redis.client });
  // Decisions from Redis however loaded the machine (the default 50 ms would let the failure policy answer).
  return createLimiter({
    store,
    policy: concurrency({ limit, leaseMs }),
    name: unique('slots'),
    timeoutMs: 60_000,
  });
}

/** Resolves once `ready()` holds, looking after each turn of the event loop's timers. */
async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await delay(2);
}

describe('throttle({ concurrency }) on Redis', () => {
  test('with a limit of 2, never more than 2 calls run at once; all complete; every slot is free at the end', async () => {
    // leaseMs far beyond the test: a waiter can only go on because a call of this throttle released.
    const inFlight = slots(2, 60_000);
    const calls = throttle({ limiter: fastRate(), concurrency: inFlight });
    let running = 0;
    let most = 0;
    const holding: Array<() => void> = [];
    const jobs = Array.from({ length: 7 }, (_, job) =>
      calls.run(async () => {
        running++;
        most = Math.max(most, running);
        await new Promise<void>((resolve) => holding.push(resolve));
        running--;
        return job;
      }),
    );
    for (let done = 0; done < jobs.length; done++) {
      await until(() => holding.length > 0 && (running === 2 || running === jobs.length - done));
      assert.ok(running <= 2, `${running} calls running at once`);
      if (running === 2) assert.equal((await inFlight.peek('default')).remaining, 0, 'both slots held');
      holding.shift()?.();
    }
    assert.deepEqual(await Promise.all(jobs), [0, 1, 2, 3, 4, 5, 6]);
    assert.equal(most, 2, 'two calls ran together, and never more');
    assert.equal((await inFlight.peek('default')).remaining, 2, 'every lease released');
  });

  test('a call that throws releases its slot; the next call gets it', async () => {
    const inFlight = slots(1, 60_000);
    const calls = throttle({ limiter: fastRate(), concurrency: inFlight, key: 'thrower' });
    await assert.rejects(
      calls.run(() => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal((await inFlight.peek('thrower')).remaining, 1, 'the thrower released its lease');
    assert.equal(await calls.run(async () => (await inFlight.peek('thrower')).remaining), 0);
    assert.equal((await inFlight.peek('thrower')).remaining, 1);
  });

  test('a call waits for a slot within maxWaitMs, then is refused and not made', async () => {
    const inFlight = slots(1, 60_000);
    const calls = throttle({ limiter: fastRate(), concurrency: inFlight, maxWaitMs: 100 });
    let letGo: (() => void) | undefined;
    const holder = calls.run(() => new Promise<void>((resolve) => (letGo = resolve)));
    await until(() => letGo !== undefined);
    let made = false;
    await assert.rejects(
      calls.run(() => {
        made = true;
      }),
      isCode(ERROR_CODES.MAX_WAIT, /`concurrency`/),
    );
    assert.equal(made, false);
    letGo?.();
    await holder;
    assert.equal((await inFlight.peek('default')).remaining, 1);
  });

  test('a call refused for want of a concurrency slot gives its rate slot back', async () => {
    // The rate's clock stands still: two slots at once, then one a minute; what is taken shows as the
    // next slot (and the key outlives the test in Redis's own time).
    const time = { now: 1_700_000_000_000 };
    const rate = createLimiter({
      store: new RedisStore({ client: suite.redis.client }),
      policy: gcra({ limit: 1, periodMs: 60_000, burst: 2 }),
      name: unique('rate'),
      clock: () => time.now,
      timeoutMs: 60_000,
    });
    const nextSlotMs = async (): Promise<number> =>
      (await askSlot(limiterPipeline(rate) as Pipeline, 'default', 1, undefined, -1)).decision.waitMs;
    const inFlight = slots(1, 60_000);
    const calls = throttle({ limiter: rate, concurrency: inFlight, maxWaitMs: 400 });
    let letGo: (() => void) | undefined;
    const holder = calls.run(() => new Promise<void>((resolve) => (letGo = resolve)));
    await until(() => letGo !== undefined);
    assert.equal(await nextSlotMs(), 0, 'the holder took one of the two slots');
    let made = false;
    await assert.rejects(
      calls.run(() => {
        made = true;
      }),
      isCode(ERROR_CODES.MAX_WAIT, /`concurrency`/),
    );
    assert.equal(made, false);
    assert.equal(await nextSlotMs(), 0, 'the refused call took the second slot and gave it back');
    assert.equal((await rate.limit('default')).allowed, true, 'the slot given back is taken again');
    assert.equal(await nextSlotMs(), 60_000);
    letGo?.();
    await holder;
  });

  test('wait() on a concurrency limiter answers the lease it took, which releases the slot', async () => {
    const inFlight = slots(1, 60_000);
    const decision = await inFlight.wait('waited');
    assert.ok(decision.lease, JSON.stringify(decision));
    assert.equal((await inFlight.peek('waited')).remaining, 0);
    assert.equal((await inFlight.release('waited', decision.lease)).released, true);
    assert.equal((await inFlight.peek('waited')).remaining, 1);
  });

  test('a call running past its lease keeps its slot: the lease is renewed every half leaseMs', async () => {
    // A 2 s lease renewed every second: a stall of up to about a second on a loaded machine is absorbed.
    const inFlight = slots(1, 2000);
    const calls = throttle({ limiter: fastRate(), concurrency: inFlight });
    const seen = await calls.run(async () => {
      await delay(2500);
      return (await inFlight.peek('default')).remaining;
    });
    assert.equal(seen, 0, 'still held after more than its leaseMs');
    assert.equal((await inFlight.peek('default')).remaining, 1);
  });

  test('a `concurrency` that is not a concurrency limiter is refused, naming the option and the value', () => {
    assert.throws(
      () => throttle({ limiter: fastRate(), concurrency: fastRate() }),
      isCode(ERROR_CODES.INVALID_OPTION, /`concurrency`.*concurrency\(\{ limit, leaseMs \}\).*gcra/),
    );
    assert.throws(
      () => throttle({ limiter: fastRate(), concurrency: 2 as unknown as Limiter }),
      isCode(ERROR_CODES.INVALID_OPTION, /`concurrency`.*got 2 \(number\)/),
    );
  });
});
