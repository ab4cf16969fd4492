// The memory store: bounded (LRU), swept without a timer per key, unref'd, with an injectable clock.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  createLimiter,
  fixedWindow,
  gcra,
  MemoryStore,
  type Policy,
  type StoreRequest,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { clearOfWindowEnd } from '../helpers/window.js';

describe('MemoryStore', () => {
  test('decideReused answers what decideNow does, in one object it reuses for limit and peek', () => {
    const policies: Policy[] = [
      fixedWindow({ limit: 3, windowMs: 1000 }),
      slidingWindow({ limit: 3, windowMs: 1000 }),
      slidingLog({ limit: 3, windowMs: 1000 }),
      gcra({ limit: 3, periodMs: 1000 }),
      tokenBucket({ capacity: 3, refillPerSecond: 3 }),
    ];
    for (const policy of policies) {
      const fresh = new MemoryStore();
      const reusing = new MemoryStore();
      const seen = new Set<object>();
      for (let i = 0; i < 40; i++) {
        const operation = i % 5 === 4 ? 'peek' : 'limit';
        const request: StoreRequest = {
          policy,
          name: 'r',
          identifier: `id-${i % 3}`,
          operation,
          cost: 1,
          now: 1_000_000 + i * 97,
        };
        const expected = fresh.decideNow(request);
        const reused = reusing.decideReused(request);
        const fields = ({ allowed, remaining, resetMs, retryAfterMs }: typeof expected) => ({
          allowed,
          remaining,
          resetMs,
          retryAfterMs,
        });
        assert.deepEqual(fields(reused), fields(expected), `${policy.description}, decision ${i}`);
        seen.add(reused);
      }
      assert.equal(seen.size, 1, `${policy.description}: one object for every decision`);
      fresh.close();
      reusing.close();
    }
  });

  test('holds at most maxKeys identifiers, forgetting the least recently used', async () => {
    // The counts are read in a minute's window: it must not end meanwhile.
    await clearOfWindowEnd(60_000, 2_000);
    const store = new MemoryStore({ maxKeys: 3 });
    const limiter = createLimiter({ store, policy: fixedWindow({ limit: 5, windowMs: 60_000 }), name: 'm' });
    await limiter.limit('a');
    await limiter.limit('b');
    await limiter.limit('c');
    await limiter.limit('a'); // a is now the most recently used; b the least
    await limiter.limit('d');
    assert.equal(store.size, 3);
    assert.equal((await limiter.peek('a')).remaining, 3, 'a kept');
    assert.equal((await limiter.peek('b')).remaining, 5, 'b forgotten');
    assert.equal((await limiter.peek('c')).remaining, 4, 'c kept');
    store.close();
  });

  test('a denied identifier stays recently used: floods do not evict themselves', async () => {
    await clearOfWindowEnd(60_000, 2_000);
    const store = new MemoryStore({ maxKeys: 2 });
    const limiter = createLimiter({ store, policy: fixedWindow({ limit: 1, windowMs: 60_000 }), name: 'm' });
    await limiter.limit('attacker');
    await limiter.limit('x');
    assert.equal((await limiter.limit('attacker')).allowed, false);
    await limiter.limit('y'); // evicts x, not the attacker
    assert.equal((await limiter.limit('attacker')).allowed, false);
    store.close();
  });

  test("an identifier's expired state is written over in place: its table entry is neither deleted nor added again", async () => {
    let now = 5_000_000;
    const store = new MemoryStore({ clock: () => now });
    // 10 a second: a decision's state lasts 100 ms, so a call 1 s later finds it expired.
    const limiter = createLimiter({ store, policy: gcra({ limit: 10, periodMs: 1000 }), name: 'quiet' });
    const first = await limiter.limit('q');
    now += 1000;
    const deletes = Map.prototype.delete;
    const sets = Map.prototype.set;
    let deleted = 0;
    let set = 0;
    Map.prototype.delete = function (this: Map<unknown, unknown>, key: unknown) {
      deleted++;
      return deletes.call(this, key);
    };
    Map.prototype.set = function (this: Map<unknown, unknown>, key: unknown, value: unknown) {
      set++;
      return sets.call(this, key, value);
    };
    let again: Awaited<ReturnType<typeof limiter.limit>>;
    try {
      again = await limiter.limit('q');
    } finally {
      Map.prototype.delete = deletes;
      Map.prototype.set = sets;
    }
    // The decision is that of a fresh identifier, and the store holds its state once.
    assert.deepEqual(again, first);
    assert.equal(store.size, 1);
    assert.deepEqual({ deleted, set }, { deleted: 0, set: 0 });
    store.close();
  });

  test('sweep drops expired state, judged in the time of the requests', async () => {
    let now = 5_000_000;
    const store = new MemoryStore({ clock: () => now });
    const log = createLimiter({ store, policy: slidingLog({ limit: 3, windowMs: 1000 }), name: 'log' });
    const bucket = createLimiter({ store, policy: gcra({ limit: 10, periodMs: 10_000 }), name: 'g' });
    await log.limit('a');
    await bucket.limit('b', { cost: 5 });
    assert.equal(store.size, 2);
    now += 999;
    assert.equal(store.sweep(), 0);
    now += 1;
    assert.equal(store.sweep(), 1, 'the log entry aged out at its window');
    now += 4000;
    assert.equal(store.sweep(), 1, 'the GCRA state after its time to refill');
    assert.equal(store.size, 0);
    store.close();
  });

  test('sweeps follow a limiter clock set apart from the store clock', async () => {
    let limiterNow = 1000;
    let storeNow = 9_000_000;
    const store = new MemoryStore({ clock: () => storeNow });
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 5, windowMs: 1000 }),
      name: 'f',
      clock: () => limiterNow,
    });
    await limiter.limit('a');
    assert.equal(store.sweep(), 0, 'not judged by the store clock, far ahead');
    storeNow += 1000;
    limiterNow += 1000;
    assert.equal(store.sweep(), 1);
    store.close();
  });

  test('its sweep timer does not keep a process alive', () => {
    const entry = fileURLToPath(new URL('../../src/index.js', import.meta.url));
    const program = `import('${entry}').then(async ({ MemoryStore, createLimiter, gcra }) => {
      const limiter = createLimiter({ store: new MemoryStore({ sweepIntervalMs: 50 }), policy: gcra({ limit: 1, periodMs: 1000 }), name: 'x' });
      await limiter.limit('a');
      console.log('done');
    });`;
    // A file rather than `-e`: Deno runs a file given to its own execPath as Node would, not an eval with import().
    const dir = mkdtempSync(join(tmpdir(), 'sluice-sweep-'));
    writeFileSync(join(dir, 'program.mjs'), program);
    const result = spawnSync(process.execPath, [join(dir, 'program.mjs')], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    rmSync(dir, { recursive: true, force: true });
    assert.equal(result.signal, null, 'the process ended by itself, not by the timeout');
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout.trim(), 'done');
  });
});
