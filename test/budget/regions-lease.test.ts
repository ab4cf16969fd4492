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
