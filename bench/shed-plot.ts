// Draws the shedding experiment as one SVG: limit, p99 latency and goodput per second over time, one line per variant.
import type { Answer } from './shed-load.js';

export interface PlotRun {
  readonly name: string;
  readonly answers: readonly Answer[];
  readonly timeline: readonly [number, number, number][];
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];
const WIDTH = 760;
const PANEL = 170;
const LEFT = 70;
const RIGHT = 170;

/** Per second of sending time: [second, p99 of the 200s in ms, 200s]. */
function perSecond(answers: readonly Answer[], seconds: number): [number, number, number][] {
  const buckets: number[][] = Array.from({ length: seconds }, () => []);
  for (const [sentMs, , status, latencyMs] of answers) {
    const second = Math.floor(sentMs / 1000);
    if (status === 200 && second < seconds) buckets[second]?.push(latencyMs);
  }
  return buckets.map((latencies, second) => {
    latencies.sort((a, b) => a - b);
    const p99 = latencies[Math.min(latencies.length - 1, Math.floor(0.99 * latencies.length))] ?? 0;
    return [second + 0.5, p99, latencies.length];
  });
}

function panel(
  top: number,
  title: string,
  seriesList: readonly { name: string; points: readonly [number, number][] }[],
  maxX: number,
  yMax: number,
  yLog: boolean,
): string {
  const height = PANEL - 40;
  const width = WIDTH - LEFT - RIGHT;
  const x = (value: number) => LEFT + (value / maxX) * width;
  const yMin = yLog ? 10 : 0;
  const y = (value: number) => {
    const v = Math.max(yMin, Math.min(yMax, value));
    const share = yLog ? Math.log10(v / yMin) / Math.log10(yMax / yMin) : v / yMax;
    return top + 20 + height * (1 - share);
  };
  const parts = [`<text x="${LEFT}" y="${top + 12}" font-size="13" font-weight="bold">${title}</text>`];
  parts.push(
    `<rect x="${LEFT}" y="${top + 20}" width="${width}" height="${height}" fill="none" stroke="#999"/>`,
  );
  const ticks = yLog ? [10, 100, 1000, 10_000].filter((tick) => tick <= yMax) : [0, yMax / 2, yMax];
  for (const tick of ticks) {
    parts.push(
      `<text x="${LEFT - 6}" y="${y(tick) + 4}" font-size="11" text-anchor="end">${Math.round(tick)}</text>`,
    );
  }
  for (let second = 0; second <= maxX; second += 5) {
    parts.push(
      `<text x="${x(second)}" y="${top + 20 + height + 14}" font-size="11" text-anchor="middle">${second} s</text>`,
    );
  }
  seriesList.forEach((series, index) => {
    const path = series.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(' ');
    parts.push(
      `<polyline fill="none" stroke="${COLORS[index % COLORS.length]}" stroke-width="1.8" points="${path}"/>`,
    );
  });
  return parts.join('\n');
}

/** The whole figure; `comment` says how it was made. */
export function shedPlot(
  runs: readonly PlotRun[],
  durationMs: number,
  slots: number,
  comment: string,
): string {
  const seconds = Math.ceil(durationMs / 1000);
  const maxX = seconds;
  const stats = runs.map((run) => perSecond(run.answers, seconds));
  const limits = runs
    .filter((run) => run.timeline.some(([, limit]) => limit > 0))
    .map((run) => ({
      name: run.name,
      points: run.timeline.map(([ms, limit]) => [ms / 1000, limit] as [number, number]),
    }));
  const limitMax = Math.max(
    4 * slots,
    ...limits.flatMap((series) => series.points.map(([, value]) => value)),
  );
  const goodputMax = Math.max(...stats.flatMap((rows) => rows.map(([, , count]) => count)), 1);
  const latencyMax =
    10 ** Math.ceil(Math.log10(Math.max(100, ...stats.flatMap((rows) => rows.map(([, p99]) => p99)))));
  const height = 3 * PANEL + 20;
  const legend = runs
    .map(
      (run, index) =>
        `<line x1="${WIDTH - RIGHT + 16}" x2="${WIDTH - RIGHT + 40}" y1="${40 + index * 18}" y2="${40 + index * 18}" stroke="${COLORS[index % COLORS.length]}" stroke-width="2"/>` +
        `<text x="${WIDTH - RIGHT + 46}" y="${44 + index * 18}" font-size="12">${run.name}</text>`,
    )
    .join('\n');
  return [
    `<!-- ${comment} -->`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif">`,
    `<title>Concurrency limit, p99 latency and goodput over time: ${runs.map((run) => run.name).join(', ')}</title>`,
    `<rect width="100%" height="100%" fill="white"/>`,
    panel(0, `Concurrency limit (service: ${slots} slots, halved mid-run)`, limits, maxX, limitMax, false),
    panel(
      PANEL,
      'p99 latency of the 200s, per second sent (ms, log)',
      runs.map((run, index) => ({
        name: run.name,
        points: (stats[index] ?? []).map(([s, p99]) => [s, p99] as [number, number]),
      })),
      maxX,
      latencyMax,
      true,
    ),
    panel(
      2 * PANEL,
      'Goodput: 200s per second sent',
      runs.map((run, index) => ({
        name: run.name,
        points: (stats[index] ?? []).map(([s, , count]) => [s, count] as [number, number]),
      })),
      maxX,
      goodputMax,
      false,
    ),
    legend,
    '</svg>',
    '',
  ].join('\n');
}
