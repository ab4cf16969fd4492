// Floors held as leases: three regions share a fixed window (each its own redis-server and load process,
// the global store 20 ms away each way). A SIGKILLed region's floor returns to the others from the first
// window after its lease ends; a region cut off for longer than a lease admits nothing on its floor once
// its lease is over, and back, waits for the window after next; no window passes the limit.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Rig, startRig, tally } from '../helpers/region-rig.js';

const REGIONS = ['eu', 'us', 'ap'] as const;
const WINDOW_MS = 1000;
const LIMIT = 300;
/** A short lease: renewed every 200 ms, lapsed 600 ms after a region's last renewal. */
const LEASE_MS = 600;
/**
 * Half the limit in floors, 50 per region: while a floor is kept for a region that is gone, the
 * others reach at most 250 (300 less it), or 200 with two gone; lent out, they reach 300.
 */
const FLOOR = 0.5;
const FLOOR_UNITS = 50;
/** Each region asks 400 units a window: two regions alone ask more than the limit. */
const UNITS_PER_SECOND = 400;
const WINDOWS = 10;
/** eu is SIGKILLed here (ms from the start: mid-window 1); its lease ends 600 ms later at most. */
const KILL_AT_MS = 1500;
/** ap is cut off from the global store for windows 5 and 6, healed at the start of 7. */
const CUT_AT_MS = 5000;
const HEAL_AT_MS = 7000;

let rig: Rig;
before(async () => {
  rig = await startRig(REGIONS, 20);
});
after(async () => {
  await rig.stop();
});

describe('floors held as leases, a window budget across three regions', () => {
  for (const kind of ['fixed', 'sliding'] as const) {
    test(`${kind}: a dead region's floor returns to the others; a region cut off past its lease admits none of it, back, waits`, async () => {
      const loads = REGIONS.map((region) =>
        rig.load({
          region,
          policy: { kind, limit: LIMIT, windowMs: WINDOW_MS },
          budget: { leaseMs: LEASE_MS, floor: FLOOR },
          identifiers: ['fixed'],
          durationMs: WINDOWS * WINDOW_MS,
          phases: [{ afterMs: 0, unitsPerSecond: UNITS_PER_SECOND }],
          timed: false,
          binMs: WINDOW_MS,
        }),
      );
      const startAt = await rig.start(loads, WINDOW_MS);
      const ap = rig.proxies[2];
      const timers = [
        setTimeout(() => loads[0]?.child.kill('SIGKILL'), startAt + KILL_AT_MS - Date.now()),
        setTimeout(() => ap?.cut(), startAt + CUT_AT_MS - Date.now()),
        setTimeout(() => ap?.heal(), startAt + HEAL_AT_MS - Date.now()),
      ];
      await Promise.all(loads.map((load) => load.exited));
      for (const timer of timers) clearTimeout(timer);
      const counts = tally(loads);
      const first = startAt / WINDOW_MS;
      const admitted = (w: number, region?: string): number => counts.admitted(first + w, region);
      const report = Array.from(
        { length: WINDOWS },
        (_, w) =>
          `window ${w}: ${REGIONS.map((r) => `${r} ${admitted(w, r)}/${counts.asked(first + w, r)}`).join(', ')}; admitted ${admitted(w)}`,
      ).join('\n');
      console.log(report);
      // Never over the limit: not while eu's floor is lent, nor while ap's is, nor when ap comes back.
      for (let w = 0; w < WINDOWS; w++) {
        assert.ok(admitted(w) <= LIMIT, `window ${w} over the limit:\n${report}`);
      }
      // eu's lease ended by 2.1 s: from window 3 its floor is out of the sums (window 3 still holds what
      // eu claimed for it before it died). In window 4 us and ap pass the 250 they could reach with eu's
      // floor kept for it.
      assert.ok(admitted(4) > LIMIT - FLOOR_UNITS, `eu's floor not lent to us and ap:\n${report}`);
      // ap, cut off at 5 s, holds its floor until 5.54 s at most and claimed nothing for window 6: it
      // admits nothing there (with its floor kept, it would admit 50).
      assert.equal(admitted(6, 'ap'), 0, `ap admitted on a floor whose lease had lapsed:\n${report}`);
      // us alone: its own floor and the two lent ones, past the 200 it could reach without them.
      assert.ok(
        admitted(6, 'us') > LIMIT - 2 * FLOOR_UNITS,
        `ap's and eu's floors not lent to us:\n${report}`,
      );
      // Healed at 7 s, ap uses its floor again only from window 9 (the window after next): in 7 and 8
      // it admits at most what the ledger grants it beyond its floor (and no window is over).
      assert.ok(admitted(9, 'ap') > 0, `ap did not come back:\n${report}`);
    });
  }
});

/** The bucket case: a bucket of 300 refilled at 300 a second (it fills in 1 s), floors of 50 a region. */
const BUCKET = { kind: 'bucket', capacity: 300, refillPerSecond: 300 } as const;
const BUCKET_BIN_MS = 50;
const BUCKET_FLOOR_UNITS = 50;
/**
 * After a kill, the dead region's floor lease ends within a lease period and a round trip; the others
 * read it lapsed at their next renewal of their own floor's lease and take it up at their next ledger
 * call (each every third of a lease), a round trip each later.
 */
const TAKEN_UP_MS = LEASE_MS + (2 * LEASE_MS) / 3 + 100;

describe('floors held as leases, a token bucket budget across three regions', () => {
  test("a dead region's floor is leased to the others within a lease period; a region cut off past its lease admits nothing, and no span passes capacity + rate × span", async () => {
    const loads = REGIONS.map((region) =>
      rig.load({
        region,
        policy: BUCKET,
        budget: { leaseMs: LEASE_MS, floor: FLOOR },
        identifiers: ['bucket'],
        durationMs: WINDOWS * 1000,
        phases: [{ afterMs: 0, unitsPerSecond: UNITS_PER_SECOND }],
        timed: false,
        binMs: BUCKET_BIN_MS,
      }),
    );
    const startAt = await rig.start(loads, 1000);
    const ap = rig.proxies[2];
    const timers = [
      setTimeout(() => loads[0]?.child.kill('SIGKILL'), startAt + KILL_AT_MS - Date.now()),
      setTimeout(() => ap?.cut(), startAt + CUT_AT_MS - Date.now()),
      setTimeout(() => ap?.heal(), startAt + HEAL_AT_MS - Date.now()),
    ];
    await Promise.all(loads.map((load) => load.exited));
    for (const timer of timers) clearTimeout(timer);
    const counts = tally(loads);
    const first = startAt / BUCKET_BIN_MS;
    const bins = (WINDOWS * 1000) / BUCKET_BIN_MS;
    // Admitted in [fromMs, toMs) after the start, by one region or all.
    const admitted = (fromMs: number, toMs: number, ...regions: string[]): number => {
      let sum = 0;
      for (let bin = fromMs / BUCKET_BIN_MS; bin < toMs / BUCKET_BIN_MS; bin++) {
        if (regions.length === 0) sum += counts.admitted(first + bin);
        else for (const region of regions) sum += counts.admitted(first + bin, region);
      }
      return sum;
    };
    const report = Array.from(
      { length: WINDOWS },
      (_, s) =>
        `second ${s}: ${REGIONS.map((r) => `${r} ${admitted(s * 1000, (s + 1) * 1000, r)}`).join(', ')}; all ${admitted(s * 1000, (s + 1) * 1000)}`,
    ).join('\n');
    console.log(report);
    // Never over: every span of bins admitted at most capacity + rate × its length, while eu's floor
    // is leased to the others, while ap's is, and when ap comes back.
    let worst = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < bins; i++) {
      let sum = 0;
      for (let j = i; j < bins; j++) {
        sum += counts.admitted(first + j);
        const bound = BUCKET.capacity + (BUCKET.refillPerSecond * (j - i + 1) * BUCKET_BIN_MS) / 1000;
        worst = Math.max(worst, sum - bound);
      }
    }
    console.log(`worst span ${worst.toFixed(1)} against capacity + rate × span`);
    assert.ok(worst <= 0, `a span admitted ${worst} units more than capacity + rate × span:\n${report}`);
    // Demand (400 a second each) keeps every bucket near empty, so a region admits at the rate it
    // holds. With eu's floor kept for it, us and ap hold at most 250 of capacity, hence 250 a second;
    // leased to them, 300. From a lease period (and two renewals) after the kill until ap is cut off:
    const fromMs = KILL_AT_MS + TAKEN_UP_MS;
    const survivors = admitted(fromMs, CUT_AT_MS, 'us', 'ap');
    const kept = ((BUCKET.refillPerSecond - BUCKET_FLOOR_UNITS) * (CUT_AT_MS - fromMs)) / 1000;
    assert.ok(
      survivors > kept,
      `us and ap admitted ${survivors}, no more than ${kept} with eu's floor kept:\n${report}`,
    );
    // ap, cut off at 5 s, uses its floor and its leases until 5.54 s at most: nothing from 5.6 s until
    // it is healed (with its floor kept, it would admit 50 a second).
    assert.equal(
      admitted(CUT_AT_MS + 600, HEAL_AT_MS, 'ap'),
      0,
      `ap admitted with its lease lapsed:\n${report}`,
    );
    // us alone from 6.2 s: its floor and both lent ones, past the 200 a second it holds without them.
    const alone = admitted(CUT_AT_MS + 1200, HEAL_AT_MS, 'us');
    const withoutThem =
      ((BUCKET.refillPerSecond - 2 * BUCKET_FLOOR_UNITS) * (HEAL_AT_MS - CUT_AT_MS - 1200)) / 1000;
    assert.ok(
      alone > withoutThem,
      `us admitted ${alone}, no more than ${withoutThem} without ap's and eu's floors:\n${report}`,
    );
    // Healed at 7 s, ap admits on its leases at once and on its floor from about 8.8 s (a lease period
    // and the time to fill after it came back).
    assert.ok(admitted(WINDOWS * 1000 - 1000, WINDOWS * 1000, 'ap') > 0, `ap did not come back:\n${report}`);
  });
});
