// The memory store against a plain model (a Map in recency order with expiry times): random uses,
// resets, sweeps and clock jumps over two limiters sharing a small store; every decision and every
// sweep's count agree, so eviction is exact LRU across tables and freed slots are reused cleanly.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLimiter, fixedWindow, MemoryStore } from '../../src/index.js';
import { seeded } from '../helpers/random.js';

const MAX_KEYS = 8;
const LIMIT = 1000;
const WINDOW_MS = 1000;

interface Held {
  count: number;
  expiresAt: number;
}

test('maxKeys, recency, expiry and sweeps agree with a model over random traffic', async () => {
  let now = 1_700_000_000_000;
  const store = new MemoryStore({ maxKeys: MAX_KEYS, clock: () => now });
  const policy = fixedWindow({ limit: LIMIT, windowMs: WINDOW_MS });
  const limiters = [createLimiter({ store, policy, name: 'a' }), createLimiter({ store, policy, name: 'b' })];
  // Key -> what the store should hold; Map order is recency, oldest first.
  const model = new Map<string, Held>();
  const use = (key: string): Held | undefined => {
    const held = model.get(key);
    if (held === undefined) return undefined;
    model.delete(key);
    if (held.expiresAt <= now) return undefined;
    model.set(key, held);
    return held;
  };
  const random = seeded(11);
  for (let step = 0; step < 4000; step++) {
    const which = random.int(0, 1);
    const limiter = limiters[which] as (typeof limiters)[number];
    const identifier = `id${random.int(0, 11)}`;
    const key = `${which}:${identifier}`;
    const roll = random.next();
    if (roll < 0.05) {
      now += random.int(0, 2) * WINDOW_MS + random.int(0, WINDOW_MS - 1);
    } else if (roll < 0.1) {
      await limiter.reset(identifier);
      model.delete(key);
    } else if (roll < 0.13) {
      const expired = [...model].filter(([, held]) => held.expiresAt <= now).map(([k]) => k);
      for (const k of expired) model.delete(k);
      assert.equal(store.sweep(), expired.length, `sweep at step ${step}`);
    } else if (roll < 0.25) {
      const held = use(key);
      const decision = await limiter.peek(identifier);
      assert.equal(decision.remaining, LIMIT - (held?.count ?? 0), `peek ${key} at step ${step}`);
    } else {
      let held = use(key);
      if (held === undefined) {
        held = { count: 0, expiresAt: 0 };
        model.set(key, held);
        if (model.size > MAX_KEYS) model.delete(model.keys().next().value as string);
      }
      held.count++;
      held.expiresAt = (Math.floor(now / WINDOW_MS) + 1) * WINDOW_MS;
      const decision = await limiter.limit(identifier);
      assert.equal(decision.remaining, LIMIT - held.count, `limit ${key} at step ${step}`);
    }
    assert.ok(store.size <= MAX_KEYS);
  }
  store.close();
});
