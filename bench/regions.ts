// The full-size regions run (minutes, never in CI): three regions, each its own redis-server and load process,
// one global redis-server 50 ms away each way; 3,000 per 10 s window, 5,000 asked per window skewed 70/20/10
// then 10/20/70, the busiest region cut off for 30 s, then another SIGKILLed. test/budget/regions.test.ts is
// its scaled-down twin in CI.
//
//   npm run gen && npx tsc -p tsconfig.json && node build/bench/regions.js [--kind fixed|sliding] [--scale 0.1]
//
// --scale shrinks every duration (windows, partition, kill) by a factor, for a quicker look.
import { parseArgs } from 'node:util';
import { latencies, percentile, type Rig, startRig, tally } from '../test/helpers/region-rig.js';

const REGIONS = ['eu', 'us', 'ap'] as const;
const LIMIT = 3000;
const DEMAND = 5000;
const DELAY_MS = 50;
const SKEW = [0.7, 0.2, 0.1];
/** Windows: 0-5 skewed 70/20/10, 6-13 10/20/70; ap cut off in 8-10 (30 s), us SIGKILLed in the middle of 11. */
const WINDOWS = 14;
const SHIFT_AT = 6;
const CUT = [8, 11] as const;
const KILL_AT = 11.5;

interface Plan {
  readonly kind: 'fixed' | 'sliding';
  readonly windowMs: number;
}

function plan(): Plan {
  const { values } = parseArgs({
    options: { kind: { type: 'string', default: 'fixed' }, scale: { type: 'string', default: '1' } },
  });
  const kind = values.kind === 'sliding' ? 'sliding' : 'fixed';
  return { kind, windowMs: Math.round(10_000 * Number(values.scale)) };
}

function schedule(rig: Rig, startAt: number, windowMs: number, kill: () => void): NodeJS.Timeout[] {
  const ap = rig.proxies[2];
  const at = (window: number, run: () => void) => setTimeout(run, startAt + window * windowMs - Date.now());
  return [at(CUT[0], () => ap?.cut()), at(CUT[1], () => ap?.heal()), at(KILL_AT, kill)];
}

async function main(): Promise<void> {
  const { kind, windowMs } = plan();
  const rig = await startRig(REGIONS, DELAY_MS);
  try {
    const loads = REGIONS.map((region, i) =>
      rig.load({
        region,
        policy: { kind, limit: LIMIT, windowMs },
        budget: {},
        identifiers: ['api'],
        durationMs: WINDOWS * windowMs,
        phases: [
          { afterMs: 0, unitsPerSecond: (DEMAND * (SKEW[i] as number) * 1000) / windowMs },
          {
            afterMs: SHIFT_AT * windowMs,
            unitsPerSecond: (DEMAND * (SKEW[2 - i] as number) * 1000) / windowMs,
          },
        ],
        timed: true,
        binMs: windowMs,
      }),
    );
    const callsBefore = await rig.globalScriptCalls();
    const startAt = await rig.start(loads, windowMs);
    const timers = schedule(rig, startAt, windowMs, () => loads[1]?.child.kill('SIGKILL'));
    await Promise.all(loads.map((load) => load.exited));
    for (const timer of timers) clearTimeout(timer);
    const elapsedS = (Date.now() - startAt) / 1000;
    const calls = (await rig.globalScriptCalls()) - callsBefore;
    report(loads, startAt / windowMs, kind, windowMs, calls / elapsedS);
  } finally {
    await rig.stop();
  }
}

function report(
  loads: Parameters<typeof tally>[0],
  first: number,
  kind: string,
  windowMs: number,
  callsPerSecond: number,
): void {
  const counts = tally(loads);
  console.log(
    `${kind} window, limit ${LIMIT} per ${windowMs} ms, demand ${DEMAND} per window, ${DELAY_MS} ms each way to the global store`,
  );
  console.log('window | eu admitted/asked | us | ap | all admitted | note');
  let over = 0;
  for (let w = 0; w < WINDOWS; w++) {
    const all = counts.admitted(first + w);
    if (all > LIMIT) over++;
    const note = [
      w === SHIFT_AT ? 'shift to 10/20/70' : '',
      w >= CUT[0] && w < CUT[1] ? 'ap cut off' : '',
      w === Math.floor(KILL_AT) ? 'us SIGKILLed mid-window' : '',
    ]
      .filter((text) => text !== '')
      .join(', ');
    const cells = REGIONS.map((r) => `${counts.admitted(first + w, r)}/${counts.asked(first + w, r)}`);
    console.log(`${w} | ${cells.join(' | ')} | ${all} | ${note}`);
  }
  const { budget, plain } = latencies(loads);
  const line = (values: number[]) =>
    `p50 ${percentile(values, 50)} µs, p99 ${percentile(values, 99)} µs, p99.9 ${percentile(values, 99.9)} µs (${values.length} calls)`;
  console.log(`windows over the limit: ${over} of ${WINDOWS}`);
  console.log(`budgeted limiter: ${line(budget)}`);
  console.log(`plain limiter beside it: ${line(plain)}`);
  console.log(`p99 difference: ${percentile(budget, 99) - percentile(plain, 99)} µs`);
  console.log(`global store: ${callsPerSecond.toFixed(2)} script calls per second (all regions)`);
}

void main();
