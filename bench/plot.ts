// A small SVG line chart (log-scaled x and y), so the benchmark can draw its own plots without a
// plotting library.

export interface Series {
  readonly label: string;
  readonly points: ReadonlyArray<{ readonly x: number; readonly y: number }>;
  /** Drawn dashed (e.g. the peers), solid otherwise. */
  readonly dashed?: boolean;
}

export interface Chart {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly Series[];
  /** How x values are written on the axis. */
  readonly formatX: (x: number) => string;
  readonly formatY: (y: number) => string;
  /** A comment written before the <svg> element (e.g. how the file was generated). */
  readonly comment?: string;
}

const WIDTH = 720;
const HEIGHT = 420;
const MARGIN = { left: 80, right: 250, top: 40, bottom: 56 };
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#17becf'];

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** 1, 2 and 5 × 10^n from just below `min` to just above `max`. */
function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  for (let power = Math.floor(Math.log10(min)); power <= Math.ceil(Math.log10(max)); power++) {
    for (const m of [1, 2, 5]) ticks.push(m * 10 ** power);
  }
  const below = ticks.filter((t) => t <= min).pop() ?? min;
  const above = ticks.find((t) => t >= max) ?? max;
  return ticks.filter((t) => t >= below && t <= above);
}

export function lineChart(chart: Chart): string {
  const xs = [...new Set(chart.series.flatMap((s) => s.points.map((p) => p.x)))].sort((a, b) => a - b);
  const ys = chart.series.flatMap((s) => s.points.map((p) => p.y)).filter((y) => Number.isFinite(y) && y > 0);
  const ticks = logTicks(Math.min(...ys, 1e9), Math.max(...ys, 1));
  const yLogMin = Math.log10(ticks[0] as number);
  const yLogSpan = Math.max(1e-9, Math.log10(ticks[ticks.length - 1] as number) - yLogMin);
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const logMin = Math.log10(xs[0] ?? 1);
  const logSpan = Math.max(1e-9, Math.log10(xs[xs.length - 1] ?? 10) - logMin);
  const px = (x: number) => MARGIN.left + ((Math.log10(x) - logMin) / logSpan) * plotWidth;
  const py = (y: number) => MARGIN.top + plotHeight - ((Math.log10(y) - yLogMin) / yLogSpan) * plotHeight;
  const parts: string[] = [
    ...(chart.comment === undefined ? [] : [`<!-- ${escapeXml(chart.comment)} -->`]),
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${MARGIN.left}" y="22" font-size="15" font-weight="bold">${escapeXml(chart.title)}</text>`,
  ];
  for (const y of ticks) {
    parts.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotWidth}" y1="${py(y)}" y2="${py(y)}" stroke="#ddd"/>`,
      `<text x="${MARGIN.left - 8}" y="${py(y) + 4}" text-anchor="end">${escapeXml(chart.formatY(y))}</text>`,
    );
  }
  for (const x of xs) {
    parts.push(
      `<line x1="${px(x)}" x2="${px(x)}" y1="${MARGIN.top}" y2="${MARGIN.top + plotHeight}" stroke="#eee"/>`,
      `<text x="${px(x)}" y="${MARGIN.top + plotHeight + 18}" text-anchor="middle">${escapeXml(chart.formatX(x))}</text>`,
    );
  }
  parts.push(
    `<text x="${MARGIN.left + plotWidth / 2}" y="${HEIGHT - 12}" text-anchor="middle">${escapeXml(chart.xLabel)}</text>`,
    `<text transform="translate(18 ${MARGIN.top + plotHeight / 2}) rotate(-90)" text-anchor="middle">${escapeXml(chart.yLabel)}</text>`,
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotWidth}" height="${plotHeight}" fill="none" stroke="#888"/>`,
  );
  chart.series.forEach((series, i) => {
    const color = COLORS[i % COLORS.length] as string;
    const points = series.points.filter((p) => Number.isFinite(p.y) && p.y > 0);
    const dash = series.dashed === true ? ' stroke-dasharray="6 4"' : '';
    parts.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2"${dash} points="${points.map((p) => `${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(' ')}"/>`,
      ...points.map(
        (p) => `<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3.5" fill="${color}"/>`,
      ),
    );
    const legendY = MARGIN.top + 10 + i * 20;
    const legendX = MARGIN.left + plotWidth + 16;
    parts.push(
      `<line x1="${legendX}" x2="${legendX + 24}" y1="${legendY}" y2="${legendY}" stroke="${color}" stroke-width="2"${dash}/>`,
      `<text x="${legendX + 30}" y="${legendY + 4}">${escapeXml(series.label)}</text>`,
    );
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
