// Compares one tick of calls on Redis and in memory, telling keys Redis expired in real time apart
// from real disagreements (shared by the differential suites).
import assert from 'node:assert/strict';
import { askSlot, limiterPipeline, type Pipeline } from '../../src/core/index.js';
import type { Decision, Limiter } from '../../src/index.js';
import type { ExpiryWatch } from './expiries.js';

/**
 * One call of a differential run; `limit` is a per-call limit when present. A `schedule` (a
 * future slot: GCRA and the token bucket) carries its longest wait (-1 only reads) and a pause.
 */
export interface TwinCall {
  readonly identifier: string;
  readonly operation: 'limit' | 'peek' | 'refund' | 'charge' | 'schedule';
  readonly cost: number;
  readonly limit?: number;
  readonly maxWaitMs?: number;
  readonly pauseMs?: number;
}

export function runCall(limiter: Limiter, c: TwinCall): Promise<Decision> {
  const limit = c.limit === undefined ? {} : { limit: c.limit };
  if (c.operation === 'refund') return limiter.refund(c.identifier, c.cost, limit);
  if (c.operation === 'schedule') {
    // Not a method of its own: wait() and throttle() ask for slots through the core.
    const pipeline = limiterPipeline(limiter) as Pipeline;
    return askSlot(pipeline, c.identifier, c.cost, limit, c.maxWaitMs ?? 0, c.pauseMs ?? 0).then(
      (slot) => slot.decision,
    );
  }
  if (c.operation === 'charge') return limiter.charge(c.identifier, c.cost, limit);
  return limiter[c.operation](c.identifier, { cost: c.cost, ...limit });
}

/**
 * Compares one tick. Redis expires keys in real time while the test runs on its own clock: when a
 * key the tick touches was expired by the server, the twins may disagree for that reason alone. Such
 * a tick is not compared; both sides forget the identifiers it touched and go on. Returns the
 * decisions (Redis's, equal to the twins') when the tick was compared, `undefined` when it was not.
 */
export async function compareTick(
  expiries: ExpiryWatch,
  onRedis: Limiter,
  inMemory: Limiter,
  calls: readonly TwinCall[],
  describeTick: () => string,
): Promise<readonly Decision[] | undefined> {
  const expected = await Promise.all(calls.map((c) => runCall(inMemory, c)));
  const actual = await Promise.all(calls.map((c) => runCall(onRedis, c)));
  if (JSON.stringify(actual) === JSON.stringify(expected)) return actual;
  await expiries.settle();
  const touched = [...new Set(calls.map((c) => c.identifier))];
  const keys = touched.map((identifier) => onRedis.store.keyFor(onRedis.name, identifier));
  if (keys.some((key) => expiries.expired.has(key))) {
    for (const identifier of touched) {
      await onRedis.reset(identifier);
      await inMemory.reset(identifier);
    }
    for (const key of keys) expiries.clear(key);
    return undefined;
  }
  assert.deepEqual(
    actual,
    expected,
    `${describeTick()}: ${JSON.stringify(calls)}\nredis  ${JSON.stringify(actual)}\nmemory ${JSON.stringify(expected)}`,
  );
  return actual;
}
