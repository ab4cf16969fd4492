// A global budget in one process (regions on MemoryStores, the ledger in a MemoryStore they share):
// options refused with a reason, the sliding estimate kept, the cost per identifier, restarts.
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { memoryLedgerFields } from '../../src/budget/ledger.js';
import {
  type BudgetLimiter,
  type BudgetOptions,
  type BudgetView,
  createLimiter,
  fixedWindow,
  MemoryStore,
  type Policy,
  SluiceError,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const REGIONS = ['eu', 'us', 'ap'];

function regionLimiter(
  policy: Policy,
  budget: Omit<BudgetOptions, 'regions'> & { readonly regions?: readonly string[] },
  store = new MemoryStore(),
): BudgetLimiter {
  return createLimiter({ store, policy, name: 'api', budget: { regions: REGIONS, ...budget } });
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('budget options', () => {
  const global = new MemoryStore();
  const policy = fixedWindow({ limit: 300, windowMs: 1000 });
  const refused: Array<[string, () => unknown, RegExp]> = [
    [
      'a region not in the list',
      () => regionLimiter(policy, { global, region: 'sa' }),
      /`budget.region` to be one of `budget.regions` \(eu, us, ap\), got "sa"/,
    ],
    [
      'a region named twice',
      () => regionLimiter(policy, { global, region: 'eu', regions: ['eu', 'eu'] }),
      /name each region once/,
    ],
    [
      'no global store',
      () => regionLimiter(policy, { global: {} as MemoryStore, region: 'eu' }),
      /`budget.global` to be a RedisStore/,
    ],
    [
      'a sliding log',
      () => regionLimiter(slidingLog({ limit: 10, windowMs: 1000 }), { global, region: 'eu' }),
      /slidingLog\(limit=10,windowMs=1000\)/,
    ],
    [
      'a policy with a share',
      () => regionLimiter(fixedWindow({ limit: 300, windowMs: 1000, share: 0.5 }), { global, region: 'eu' }),
      /without `share`/,
    ],
    [
      'a sliding floor above half',
      () =>
        regionLimiter(slidingWindow({ limit: 300, windowMs: 1000 }), { global, region: 'eu', floor: 0.6 }),
      /`budget.floor` to be a number from 0 to 0.5, got 0.6/,
    ],
    [
      'stored overrides beside a budget',
      () =>
        createLimiter({
          store: new MemoryStore(),
          policy,
          name: 'api',
          overrides: true,
          budget: { global, region: 'eu', regions: REGIONS },
        }),
      /`overrides` to be false for a limiter with a `budget`/,
    ],
    [
      'an unknown option',
      () => regionLimiter(policy, { global, region: 'eu', leases: 3 } as unknown as BudgetOptions),
      /Unknown option `budget.leases`/,
    ],
  ];
  test('refuses charge() and reserve(), writing nothing: a region holds only what was granted', async () => {
    const store = new MemoryStore();
    const limiter = regionLimiter(policy, { global, region: 'eu' }, store);
    try {
      for (const call of [() => limiter.charge('acme', 5), () => limiter.reserve('acme')]) {
        await assert.rejects(call(), (error: unknown) => {
          assert.ok(error instanceof SluiceError);
          assert.equal(error.code, 'ERR_SLUICE_INVALID_OPTION');
          assert.match(error.message, /without `budget`/);
          return true;
        });
      }
      assert.equal((await limiter.peek('acme')).remaining, 10, 'the floor, untouched');
    } finally {
      limiter.close();
    }
  });
  for (const [what, make, message] of refused) {
    test(`refuses ${what}, with a message that names it`, () => {
      assert.throws(make, (error: unknown) => {
        assert.ok(error instanceof SluiceError);
        assert.equal(error.code, 'ERR_SLUICE_INVALID_OPTION');
        assert.match(error.message, message);
        return true;
      });
    });
  }
});

describe('a sliding window budget across three regions', () => {
  test('the estimate over all regions, previous × (1 − elapsed) + current, never passes the limit', async () => {
    const windowMs = 500;
    const limit = 150;
    const global = new MemoryStore();
    const limiters = REGIONS.map((region) =>
      regionLimiter(slidingWindow({ limit, windowMs }), { global, region }),
    );
    const binMs = 10;
    const admitted = new Map<number, number>();
    // 250 units a window asked, 70/20/10, for six windows.
    const start = (Math.floor(Date.now() / windowMs) + 1) * windowMs;
    await sleep(start - Date.now());
    const issued = [0, 0, 0];
    const shares = [0.7, 0.2, 0.1];
    while (Date.now() < start + 6 * windowMs) {
      for (let r = 0; r < 3; r++) {
        const due = Math.floor(((Date.now() - start) * 250 * (shares[r] as number)) / windowMs);
        while ((issued[r] as number) < due) {
          issued[r] = (issued[r] as number) + 1;
          const at = Date.now();
          if ((await (limiters[r] as BudgetLimiter).limit('k')).allowed) {
            const bin = Math.floor(at / binMs);
            admitted.set(bin, (admitted.get(bin) ?? 0) + 1);
          }
        }
      }
      await sleep(2);
    }
    for (const limiter of limiters) limiter.close();
    let worst = 0;
    let total = 0;
    for (let bin = start / binMs; bin < (start + 6 * windowMs) / binMs; bin++) {
      const end = (bin + 1) * binMs;
      const window = Math.floor((end - 1) / windowMs);
      let previous = 0;
      let current = 0;
      for (let b = ((window - 1) * windowMs) / binMs; b < (window * windowMs) / binMs; b++)
        previous += admitted.get(b) ?? 0;
      for (let b = (window * windowMs) / binMs; b <= bin; b++) current += admitted.get(b) ?? 0;
      const estimate = previous * (1 - (end - window * windowMs) / windowMs) + current;
      worst = Math.max(worst, estimate);
      total += admitted.get(bin) ?? 0;
    }
    assert.ok(worst <= limit, `the estimate reached ${worst}`);
    // Most of the budget was used: at least 60% over the six windows (the sliding rule releases the
    // next window's units as the previous one's weight falls, and regions ask as they run low).
    assert.ok(total >= 0.6 * 6 * limit, `${total} admitted in six windows`);
  });
});

describe('many identifiers', () => {
  test('each active identifier costs a few ledger entries per window; idle ones hold nothing', async () => {
    const windowMs = 400;
    const global = new MemoryStore();
    const limiter = regionLimiter(fixedWindow({ limit: 100, windowMs }), {
      global,
      region: 'eu',
      maxIdentifiers: 200,
    });
    try {
      const identifiers = Array.from({ length: 300 }, (_, i) => `tenant-${i}`);
      const start = (Math.floor(Date.now() / windowMs) + 1) * windowMs;
      await sleep(start - Date.now());
      // Three windows: each identifier asks 5 units a window, spread out.
      while (Date.now() < start + 3 * windowMs) {
        await Promise.all(identifiers.map((identifier) => limiter.limit(identifier)));
        await sleep(windowMs / 5);
      }
      const busy: BudgetView = limiter.budget();
      assert.equal(busy.identifiers, 200, 'the tracked identifiers are bounded by maxIdentifiers');
      // Per tracked identifier and window: its report and its claim, a chunk or a give-back now and then.
      // The windows the worker ran in: the loop's last round may end in a fourth on a loaded machine.
      const windows = Math.ceil((Date.now() - start) / windowMs);
      const perIdentifierWindow = busy.ledgerEntries / (200 * windows);
      assert.ok(perIdentifierWindow <= 4, `${perIdentifierWindow} ledger entries per identifier per window`);
      // One ledger call carries up to 64 identifiers.
      assert.ok(
        busy.ledgerCalls <= busy.ledgerEntries / 20,
        `${busy.ledgerCalls} calls for ${busy.ledgerEntries} entries`,
      );
      // Idle for three windows: the worker forgets them, the ledger's entries expire.
      await sleep(3 * windowMs);
      await limiter.limit('tenant-0');
      await sleep(windowMs);
      const quiet = limiter.budget();
      assert.ok(quiet.identifiers <= 1, `${quiet.identifiers} identifiers still tracked`);
      const held = identifiers.filter(
        (id) => memoryLedgerFields(global, `rl:budget:api:{${id}}`) !== undefined,
      );
      assert.ok(held.length <= 1, `${held.length} identifiers still in the ledger`);
    } finally {
      limiter.close();
    }
  });
});

describe('a region that restarts', () => {
  const policy = fixedWindow({ limit: 300, windowMs: 60_000 });
  // What was granted and admitted is one minute's window: it must not end meanwhile.
  beforeEach(() => clearOfWindowEnd(60_000, 10_000));

  test('with its store: goes on with what the ledger granted it, not from its floor', async () => {
    const global = new MemoryStore();
    const store = new MemoryStore();
    const first = regionLimiter(policy, { global, region: 'eu' }, store);
    // The floor is 10: ask beyond it, and let the worker lease more.
    for (let i = 0; i < 40; i++) {
      await first.limit('k');
      await sleep(2);
    }
    await sleep(50);
    const before = await first.peek('k');
    first.close();
    assert.ok(before.remaining > 0 && 40 - 10 > 0, `granted beyond the floor: ${before.remaining} left`);
    const restarted = regionLimiter(policy, { global, region: 'eu' }, store);
    try {
      assert.equal((await restarted.peek('k')).remaining, before.remaining);
    } finally {
      restarted.close();
    }
  });

  test('without its store: what was granted for the window counts as used', async () => {
    const global = new MemoryStore();
    const first = regionLimiter(policy, { global, region: 'eu' });
    let admitted = 0;
    for (let i = 0; i < 60; i++) {
      if ((await first.limit('k')).allowed) admitted++;
      await sleep(2);
    }
    first.close();
    // The region's store is gone (a new, empty one): its first window decides on the floor, and the
    // grant the ledger sent it before counts as spent as soon as the worker writes it again.
    const restarted = regionLimiter(policy, { global, region: 'eu' });
    try {
      for (let i = 0; i < 200; i++) {
        if ((await restarted.limit('k')).allowed) admitted++;
        await sleep(1);
      }
      const fields = memoryLedgerFields(global, 'rl:budget:api:{k}');
      const index = Math.floor(Date.now() / 60_000);
      const granted = 10 + (fields?.get(`g:${index}:0`) ?? 0);
      // At most the floor twice (once per store) beyond what the ledger granted eu.
      assert.ok(admitted <= granted + 10, `${admitted} admitted, ${granted} granted`);
    } finally {
      restarted.close();
    }
  });
});

describe('close()', () => {
  test('stops the worker: no ledger call after it', async () => {
    const global = new MemoryStore();
    const limiter = regionLimiter(tokenBucket({ capacity: 30, refillPerSecond: 10 }), {
      global,
      region: 'us',
      leaseMs: 300,
    });
    await limiter.limit('k');
    await sleep(50);
    const calls = limiter.budget().ledgerCalls;
    assert.ok(calls >= 1, 'the first decision asked the ledger for a lease');
    limiter.close();
    await limiter.limit('k');
    await sleep(400);
    assert.equal(limiter.budget().ledgerCalls, calls);
  });
});
