// A token bucket shared by three regions (each its own redis-server and load process, the global store
// 20 ms away each way): over any span the regions admit at most capacity + rate × span together, and
// what a SIGKILLed region leased comes back to the others within about one lease period.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Rig, startRig, tally } from '../helpers/region-rig.js';

const REGIONS = ['eu', 'us', 'ap'] as const;
const CAPACITY = 100;
const REFILL_PER_SECOND = 50;
const LEASE_MS = 1000;
const BIN_MS = 10;
/**
 * A dead region's leases end within a lease period of its death; the others take them up at their
 * next renewal (every third of a lease period), a round trip (40 ms) and a poll (25 ms) later.
 */
const TAKEN_UP_MS = LEASE_MS + LEASE_MS / 3 + 100;
/** The capacity regions lease beyond their floors: 100 less the default floor (10%, 3 each). */
const POOL = CAPACITY - 3 * 3;

/** A region's latest lease in the ledger's fields: the last step of its staircase. */
function latestLease(fields: Record<string, number>, region: number): number {
  let k = 0;
  while (fields[`l:${region}:${k + 1}`] !== undefined) k++;
  return fields[`l:${region}:${k}`] ?? 0;
}

let rig: Rig;
before(async () => {
  rig = await startRig(REGIONS, 20);
});
after(async () => {
  await rig.stop();
});

describe('a token bucket budget across three regions', () => {
  test("never more than capacity + rate × span; a killed region's leases return to the others", async () => {
    // Each region asks 40 units a second, 120 together: more than the bucket's 50.
    const loads = REGIONS.map((region) =>
      rig.load({
        region,
        policy: { kind: 'bucket', capacity: CAPACITY, refillPerSecond: REFILL_PER_SECOND },
        budget: { leaseMs: LEASE_MS },
        identifiers: ['api'],
        durationMs: 5000,
        phases: [{ afterMs: 0, unitsPerSecond: 40 }],
        timed: false,
        binMs: BIN_MS,
      }),
    );
    const startAt = await rig.start(loads, 1000);
    const killAt = startAt + 2000;
    await new Promise((resolve) => setTimeout(resolve, killAt - Date.now()));
    loads[0]?.child.kill('SIGKILL');
    const killedAt = Date.now();
    // What eu holds in the ledger once its last calls landed (20 ms away): every lease ends within
    // one lease period of the kill, on the ledger's clock (this machine's).
    await new Promise((resolve) => setTimeout(resolve, 60));
    const held = await rig.ledger('api');
    let lastExpiry = 0;
    for (let k = 0; held[`x:0:${k}`] !== undefined; k++)
      lastExpiry = Math.max(lastExpiry, held[`x:0:${k}`] as number);
    assert.ok(lastExpiry > killedAt, 'eu held a lease when it was killed');
    assert.ok(
      lastExpiry <= killedAt + LEASE_MS + 60,
      `eu's leases end ${lastExpiry - killedAt} ms after the kill, more than a lease period`,
    );
    // The survivors' leases, from the ledger, until they hold what eu held as well.
    let returnedAfterMs = Number.NaN;
    const seen: string[] = [];
    while (Date.now() < killAt + 2 * LEASE_MS) {
      const fields = await rig.ledger('api');
      const survivors = latestLease(fields, 1) + latestLease(fields, 2);
      seen.push(`${Date.now() - killAt} ms: eu ${latestLease(fields, 0)}, us+ap ${survivors}`);
      if (survivors >= 0.9 * POOL) {
        returnedAfterMs = Date.now() - killAt;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await Promise.all(loads.slice(1).map((load) => load.exited));
    assert.ok(
      returnedAfterMs <= TAKEN_UP_MS,
      `eu's leases not taken up by the others within a lease period, a renewal and a round trip:\n${seen.join('\n')}`,
    );
    // Every span of bins [i, j] admitted at most capacity + rate × its length.
    const counts = tally(loads);
    const bins = [...counts.bins.keys()].sort((a, b) => a - b);
    const first = bins[0] as number;
    const last = bins.at(-1) as number;
    const admitted: number[] = [];
    for (let bin = first; bin <= last; bin++) admitted.push(counts.admitted(bin));
    let worst = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < admitted.length; i++) {
      let sum = 0;
      for (let j = i; j < admitted.length; j++) {
        sum += admitted[j] as number;
        const bound = CAPACITY + (REFILL_PER_SECOND * (j - i + 1) * BIN_MS) / 1000;
        worst = Math.max(worst, sum - bound);
      }
    }
    const total = admitted.reduce((a, b) => a + b, 0);
    if (process.env.SLUICE_RIG_DEBUG) {
      for (let from = first; from <= last; from += 50) {
        const row = REGIONS.map((region) => {
          let sum = 0;
          for (let bin = from; bin < from + 50; bin++) sum += counts.admitted(bin, region);
          return `${region} ${sum}`;
        });
        console.log(`${(from - first) * BIN_MS} ms: ${row.join(', ')}`);
      }
    }
    console.log(
      `eu's last lease ended ${lastExpiry - killedAt} ms after the kill, taken up ${returnedAfterMs} ms after it; admitted ${total} in ${admitted.length * BIN_MS} ms; worst span ${worst.toFixed(1)} under its bound`,
    );
    assert.ok(worst <= 0, `a span admitted ${worst} units more than capacity + rate × span`);
    // Once eu's leases came back, the others use the whole bucket: 90% of its rate at least.
    const from = Math.ceil((killedAt + TAKEN_UP_MS) / BIN_MS);
    let after = 0;
    for (let bin = from; bin <= last; bin++) after += counts.admitted(bin);
    const expected = (REFILL_PER_SECOND * (last - from + 1) * BIN_MS) / 1000;
    assert.ok(after >= 0.9 * expected, `${after} admitted after the leases came back, of ${expected}`);
  });
});
