// Three regions, each its own redis-server and load process, one global redis-server 20 ms away each way:
// the budget is never passed, shares follow demand, a cut-off region only under-admits while the others
// take up what it leaves, and no decision waits on the global store. A scaled-down run of the full one
// in bench/regions.ts (windows of 1 s, 2 s for the sliding one, instead of 10 s; a limit of 300 instead of 3000).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { type BudgetLimiter, createLimiter, fixedWindow, RedisStore } from '../../src/index.js';
import { type Rig, startRig, type Tally, tally } from '../helpers/region-rig.js';

const REGIONS = ['eu', 'us', 'ap'] as const;
const WINDOW_MS = 1000;
/** The sliding window's run has windows of 2 s (see its test). */
const SLIDING_WINDOW_MS = 2000;
const LIMIT = 300;
/** Units asked per window by all regions together: 5/3 of the limit, as in the full run. */
const DEMAND = 500;
const DELAY_MS = 20;
/** The floor each region holds without asking: the default 10% of the limit, split in three. */
const FLOOR = 10;

/**
 * The windows of `windows` in which the budget admitted under 90% of the limit, of those the load
 * delivered: all regions together asked at least 80% of DEMAND in the window and in the one before
 * (on this shared 2-core machine a load process is sometimes starved for a whole window; its
 * demand then arrives late, in a burst, and says nothing of the budget). Throws when fewer than
 * `atLeast` windows were delivered: too starved a run shows nothing either way.
 */
function underNinety(
  counts: Tally,
  first: number,
  windows: readonly number[],
  atLeast: number,
  report: string,
): number[] {
  const delivered = windows.filter(
    (w) => counts.asked(first + w) >= 0.8 * DEMAND && counts.asked(first + w - 1) >= 0.8 * DEMAND,
  );
  assert.ok(
    delivered.length >= atLeast,
    `only windows ${delivered.join(', ')} of ${windows.join(', ')} had their demand delivered (the machine starved the load processes):\n${report}`,
  );
  return delivered.filter((w) => counts.admitted(first + w) < 0.9 * LIMIT);
}

/** What a skewed run admitted, per window from its start, with a report of every window. */
interface SkewedRun {
  readonly counts: Tally;
  /** The first window's number (epoch ms / its window). */
  readonly first: number;
  readonly report: string;
}

/**
 * One load process per region for `windows` windows, demand skewed 70/20/10 (eu/us/ap), then from
 * window `shiftAt` on 10/20/70; `during` is called with the start time (to cut a link). The first
 * `reported` windows are reported and checked against the limit.
 */
async function skewedRun(
  kind: 'fixed' | 'sliding',
  windowMs: number,
  windows: number,
  shiftAt: number,
  reported: number,
  during: (startAt: number) => () => void = () => () => {},
): Promise<SkewedRun> {
  const skew = [0.7, 0.2, 0.1];
  const loads = REGIONS.map((region, i) =>
    rig.load({
      region,
      policy: { kind, limit: LIMIT, windowMs },
      budget: {},
      identifiers: [kind],
      durationMs: windows * windowMs,
      phases: [
        { afterMs: 0, unitsPerSecond: (DEMAND * (skew[i] as number) * 1000) / windowMs },
        {
          afterMs: shiftAt * windowMs,
          unitsPerSecond: (DEMAND * (skew[2 - i] as number) * 1000) / windowMs,
        },
      ],
      timed: false,
      binMs: windowMs,
    }),
  );
  const startAt = await rig.start(loads, windowMs);
  const stop = during(startAt);
  await Promise.all(loads.map((load) => load.exited));
  stop();
  const counts = tally(loads);
  const first = startAt / windowMs;
  const line = (w: number): string =>
    `window ${w}: ${REGIONS.map((r) => `${r} ${counts.admitted(first + w, r)}/${counts.asked(first + w, r)}`).join(', ')}; admitted ${counts.admitted(first + w)}`;
  const report = Array.from({ length: reported }, (_, w) => line(w)).join('\n');
  console.log(report);
  for (let w = 0; w < reported; w++) {
    assert.ok(counts.admitted(first + w) <= LIMIT, `window ${w} over the limit:\n${report}`);
  }
  return { counts, first, report };
}

let rig: Rig;
before(async () => {
  rig = await startRig(REGIONS, DELAY_MS);
});
after(async () => {
  await rig.stop();
});

describe('a fixed window budget across three regions', () => {
  test('skewed 70/20/10, then 10/20/70, then the busy region cut off: never over, shares follow, the others take up', async () => {
    // Windows 0-1 skewed one way, 2-9 the other; ap (then the busiest) is cut off in 5-7, healed
    // for 8-9. Every window within the limit.
    const { counts, first, report } = await skewedRun('fixed', WINDOW_MS, 10, 2, 10, (startAt) => {
      const ap = rig.proxies[2];
      const cut = setTimeout(() => ap?.cut(), startAt + 5 * WINDOW_MS - Date.now());
      const heal = setTimeout(() => ap?.heal(), startAt + 8 * WINDOW_MS - Date.now());
      return () => {
        clearTimeout(cut);
        clearTimeout(heal);
      };
    });
    // Shares are claimed ahead from the demand reported in each window; what a region will not use
    // it gives back mid-window. From the second window after each change on (the start, the shift
    // at 2, ap back at 8), at least 90% of the limit passes in every window.
    assert.deepEqual(
      underNinety(counts, first, [1, 3, 4, 9], 3, report),
      [],
      `windows under 90%:\n${report}`,
    );
    // Cut off, ap decides on what it holds: its share claimed for window 5, then its floor alone.
    for (const w of [6, 7]) {
      assert.ok(
        counts.admitted(first + w, 'ap') <= FLOOR,
        `ap admitted past its floor while cut off:\n${report}`,
      );
      // The others are granted what ap leaves: all they ask (they asked for 150 of the 300).
      for (const region of ['eu', 'us']) {
        const asked = counts.asked(first + w, region);
        assert.ok(
          counts.admitted(first + w, region) >= 0.9 * asked,
          `${region} not taking up ap's part:\n${report}`,
        );
      }
    }
    // Healed, ap asks again and is granted its share within a window.
    assert.ok(counts.admitted(first + 9, 'ap') > 2 * FLOOR, `ap did not recover:\n${report}`);
  });

  test('no decision calls the global store: a burst of 2000 decisions, and the link cut during another', async () => {
    const settings = { host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 };
    const region = new Redis({ ...settings, port: rig.regionServers[0]?.port as number });
    const global = new Redis({ ...settings, port: rig.proxies[0]?.port as number });
    region.on('error', () => {});
    global.on('error', () => {});
    const limiter: BudgetLimiter = createLimiter({
      store: new RedisStore({ client: region }),
      policy: fixedWindow({ limit: 1_000_000, windowMs: 60_000 }),
      name: 'burst',
      timeoutMs: 10_000,
      budget: { global: new RedisStore({ client: global }), region: 'eu', regions: REGIONS },
    });
    try {
      const burst = async (): Promise<number> => {
        const decisions = await Promise.all(
          Array.from({ length: 2000 }, (_, i) => limiter.limit(`id-${i % 50}`)),
        );
        return decisions.filter((decision) => decision.allowed && decision.reason === undefined).length;
      };
      // A process admits on its floor once its first renewal of the region's lease is answered.
      while (!limiter.budget().floorHeld) await new Promise((resolve) => setTimeout(resolve, 10));
      const scriptsBefore = await rig.globalScriptCalls();
      const ledgerBefore = limiter.budget().ledgerCalls;
      assert.equal(await burst(), 2000);
      // Let the worker's calls the burst started finish, so that both counts include them.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const scripts = (await rig.globalScriptCalls()) - scriptsBefore;
      const ledger = limiter.budget().ledgerCalls - ledgerBefore;
      // Every script the global store ran came from the worker's ledger calls (at most 64
      // identifiers each), none from a decision: 2000 decisions, a handful of calls.
      assert.ok(
        scripts <= 2 * ledger && ledger <= 5,
        `${scripts} scripts on the global store, ${ledger} ledger calls`,
      );
      rig.proxies[0]?.cut();
      try {
        assert.equal(await burst(), 2000, 'decisions answered by the region alone while its link is cut');
      } finally {
        rig.proxies[0]?.heal();
      }
    } finally {
      limiter.close();
      region.disconnect();
      global.disconnect();
    }
  });
});

describe('a sliding window budget across three regions', () => {
  test('skewed 70/20/10, then 10/20/70: never over, at least 90% of the limit in every window from the second after each change', async () => {
    // Windows 0-1 skewed one way, 2-5 the other; every window but the last (the load's last moments
    // are cut short) within the limit. Windows of 2 s: a load process this machine starves for a
    // tenth of a second (its worker's claim for the next window lands late) costs half as much of
    // one; with 1 s windows one run in nine (at a load average of 10) had a window at 85-87%.
    const { counts, first, report } = await skewedRun('sliding', SLIDING_WINDOW_MS, 6, 2, 5);
    // Each region keeps its own estimate within its grant, so the grants of one window may add up
    // to the limit whatever the next window was granted ahead (a grant for the current window that
    // had to leave room for the next one's share held a saturated sliding budget to 80%); a region
    // keeps for the next window what it is asked for beyond its floor, and gives back mid-window
    // what it will not use. From the second window after each change (the start, the shift at 2)
    // on, at least 90% of the limit passes in every window.
    assert.deepEqual(underNinety(counts, first, [1, 3, 4], 2, report), [], `windows under 90%:\n${report}`);
  });
});
