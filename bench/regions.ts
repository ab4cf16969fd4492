// The full-size regions run (minutes, never in CI): three regions, each its own redis-server and load process,
// one global redis-server 50 ms away each way; 3,000 per 10 s window, 5,000 asked per window skewed 70/20/10
// then 10/20/70, the busiest region cut off for 30 s, then another SIGKILLed. test/budget/regions.test.ts is
// its scaled-down twin in CI.
//
//   npm run gen && npx tsc -p tsconfig.json && node build/bench/regions.js [--kind fixed|sliding|bucket] [--scale 0.1]
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
/** A bucket's counts are kept per 100 ms, to check every span against capacity + rate × span. */
const BUCKET_BIN_MS = 100;

interface Plan {
  readonly kind: 'fixed' | 'sliding' | 'bucket';
  readonly windowMs: number;
}

function plan(): Plan {
  const { values } = parseArgs({
    options: { kind: { type: 'string', default: 'fixed' }, scale: { type: 'string', default: '1' } },
  });
  const kind = values.kind === 'sliding' || values.kind === 'bucket' ? values.kind : 'fixed';
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
        // A bucket of the same size: 3,000 of capacity, refilled at 3,000 per window.
        policy:
          kind === 'bucket'
            ? { kind, capacity: LIMIT, refillPerSecond: (LIMIT * 1000) / windowMs }
            : { kind, limit: LIMIT, windowMs },
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
        binMs: kind === 'bucket' ? BUCKET_BIN_MS : windowMs,
      }),
    );
    const callsBefore = await rig.globalScriptCalls();
    const startAt = await rig.start(loads, windowMs);
    const timers = schedule(rig, startAt, windowMs, () => loads[1]?.child.kill('SIGKILL'));
    await Promise.all(loads.map((load) => load.exited));
    for (const timer of timers) clearTimeout(timer);
    const elapsedS = (Date.now() - startAt) / 1000;
    const calls = (await rig.globalScriptCalls()) - callsBefore;
    report(loads, startAt, { kind, windowMs }, calls / elapsedS);
  } finally {
    await rig.stop();
  }
}

/** Over every span of bins, how far the admitted units came to capacity + rate × span (≤ 0: within). */
function worstSpan(admitted: readonly number[], binMs: number, windowMs: number): number {
  const perBin = (LIMIT * binMs) / windowMs;
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < admitted.length; i++) {
    let sum = 0;
    for (let j = i; j < admitted.length; j++) {
      sum += admitted[j] as number;
      worst = Math.max(worst, sum - (LIMIT + perBin * (j - i + 1)));
    }
  }
  return worst;
}

function report(
  loads: Parameters<typeof tally>[0],
  startAt: number,
  plan: Plan,
  callsPerSecond: number,
): void {
  const { kind, windowMs } = plan;
  const binMs = kind === 'bucket' ? BUCKET_BIN_MS : windowMs;
  const counts = tally(loads);
  const first = startAt / binMs;
  const perWindow = windowMs / binMs;
  const sum = (w: number, pick: (bin: number) => number): number => {
    let total = 0;
    for (let b = 0; b < perWindow; b++) total += pick(first + w * perWindow + b);
    return total;
  };
  const terms =
    kind === 'bucket'
      ? `a bucket of ${LIMIT} refilled at ${LIMIT} per ${windowMs} ms`
      : `${kind} window, limit ${LIMIT} per ${windowMs} ms`;
  console.log(`${terms}, demand ${DEMAND} per ${windowMs} ms, ${DELAY_MS} ms each way to the global store`);
  console.log('window | eu admitted/asked | us | ap | all admitted | note');
  let over = 0;
  for (let w = 0; w < WINDOWS; w++) {
    const all = sum(w, (bin) => counts.admitted(bin));
    if (all > LIMIT) over++;
    const note = [
      w === SHIFT_AT ? 'shift to 10/20/70' : '',
      w >= CUT[0] && w < CUT[1] ? 'ap cut off' : '',
      w === Math.floor(KILL_AT) ? 'us SIGKILLed mid-window' : '',
    ]
      .filter((text) => text !== '')
      .join(', ');
    const cells = REGIONS.map(
      (r) => `${sum(w, (bin) => counts.admitted(bin, r))}/${sum(w, (bin) => counts.asked(bin, r))}`,
    );
    console.log(`${w} | ${cells.join(' | ')} | ${all} | ${note}`);
  }
  const { budget, plain } = latencies(loads);
  const line = (values: number[]) =>
    `p50 ${percentile(values, 50)} µs, p99 ${percentile(values, 99)} µs, p99.9 ${percentile(values, 99.9)} µs (${values.length} calls)`;
  if (kind === 'bucket') {
    const admitted = Array.from({ length: WINDOWS * perWindow }, (_, b) => counts.admitted(first + b));
    console.log(`worst span against capacity + rate × span: ${worstSpan(admitted, binMs, windowMs)} units`);
  } else console.log(`windows over the limit: ${over} of ${WINDOWS}`);
  console.log(`budgeted limiter: ${line(budget)}`);
  console.log(`plain limiter beside it: ${line(plain)}`);
  console.log(`p99 difference: ${percentile(budget, 99) - percentile(plain, 99)} µs`);
  console.log(`global store: ${callsPerSecond.toFixed(2)} script calls per second (all regions)`);
}

void main();
