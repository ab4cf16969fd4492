// Three regions, each its own redis-server and load process, one global redis-server 20 ms away each
// way: the budget is never passed, shares follow demand, and a cut-off region only under-admits.
// A scaled-down run of the full one in bench/regions.ts (1 s windows instead of 10 s).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Load, type Rig, startRig, tally } from '../helpers/region-rig.js';

const REGIONS = ['eu', 'us', 'ap'] as const;
const WINDOW_MS = 1000;
const LIMIT = 300;
/** Units asked per window by all regions together: 5/3 of the limit, as in the full run. */
const DEMAND = 500;
const DELAY_MS = 20;

let rig: Rig;
before(async () => {
  rig = await startRig(REGIONS, DELAY_MS);
});
after(async () => {
  await rig.stop();
});

function windowLoad(
  region: string,
  name: string,
  durationMs: number,
  shares: ReadonlyArray<{ readonly afterMs: number; readonly share: number }>,
): Load {
  return rig.load({
    region,
    policy: { kind: 'fixed', limit: LIMIT, windowMs: WINDOW_MS },
    budget: {},
    identifiers: [name],
    durationMs,
    phases: shares.map(({ afterMs, share }) => ({
      afterMs,
      unitsPerSecond: (DEMAND * share * 1000) / WINDOW_MS,
    })),
    timed: false,
    binMs: WINDOW_MS,
  });
}

describe('a fixed window budget across three regions', () => {
  test('skewed 70/20/10, then 10/20/70: no window over the limit, shares follow within one window', async () => {
    const skew = [0.7, 0.2, 0.1];
    const loads = REGIONS.map((region, i) =>
      windowLoad(region, 'shift', 8 * WINDOW_MS, [
        { afterMs: 0, share: skew[i] as number },
        { afterMs: 4 * WINDOW_MS, share: skew[2 - i] as number },
      ]),
    );
    const startAt = await rig.start(loads, WINDOW_MS);
    const shiftAt = startAt + 4 * WINDOW_MS;
    const endAt = shiftAt + 4 * WINDOW_MS;
    await Promise.all(loads.map((load) => load.exited));
    const counts = tally(loads);
    const first = startAt / WINDOW_MS;
    const lines: string[] = [];
    for (let bin = first; bin < endAt / WINDOW_MS; bin++) {
      lines.push(
        `window ${bin - first}: ${REGIONS.map((r) => `${r} ${counts.admitted(bin, r)}/${counts.asked(bin, r)}`).join(', ')}; admitted ${counts.admitted(bin)}`,
      );
    }
    const report = lines.join('\n');
    for (let bin = first; bin < endAt / WINDOW_MS; bin++) {
      assert.ok(counts.admitted(bin) <= LIMIT, `window ${bin - first} over the limit:\n${report}`);
    }
    // Shares are claimed ahead from the demand reported in each window: the window after the shift
    // still runs on the old shares (its reserve helps), the next one on the new.
    for (const bin of [
      first + 1,
      first + 2,
      first + 3,
      shiftAt / WINDOW_MS + 1,
      shiftAt / WINDOW_MS + 2,
      shiftAt / WINDOW_MS + 3,
    ]) {
      assert.ok(counts.admitted(bin) >= 0.9 * LIMIT, `window ${bin - first} admitted under 90%:\n${report}`);
    }
    console.log(report);
  });
});
