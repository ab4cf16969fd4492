// Small helpers every section's Markdown uses: tables, ratios taken within rounds, number formats.
import { median } from './load.js';
import type { RunRecord, Summary } from './race.js';

export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  const align = header.map((_, i) => (i === 0 ? '---' : '---:'));
  return [line(header), line(align), ...rows.map(line)].join('\n');
}

/** The ratio of a figure between two contenders in each round (both ran in it): median and range. */
export interface Paired {
  readonly median: number;
  readonly low: number;
  readonly high: number;
}

export function paired(a: Summary, b: Summary, figure: (run: RunRecord) => number): Paired {
  const ratios = a.runs.flatMap((run) => {
    const other = b.runs.find((r) => r.round === run.round);
    return other === undefined ? [] : [figure(run) / figure(other)];
  });
  return { median: median(ratios), low: Math.min(...ratios), high: Math.max(...ratios) };
}

export function byId<T extends { readonly id: string }>(
  rows: readonly T[] | undefined,
  id: string,
): T | undefined {
  return rows?.find((row) => row.id === id);
}

export const ratio = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(2)}×` : '–');
export const pairedText = (p: Paired): string =>
  p.low === p.high ? ratio(p.median) : `${ratio(p.median)} (rounds ${p.low.toFixed(2)}–${ratio(p.high)})`;
export const perSecond = (r: RunRecord): number => r.perSecond;
export const p99 = (r: RunRecord): number => r.p99Ms ?? Number.NaN;
export const scriptUsec = (r: RunRecord): number => r.scriptUsecPerDecision;
export const ms = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '–');
export const count = (x: number): string =>
  Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–';
export const percent = (x: number): string => `${(x * 100).toFixed(1)}%`;

/** The range of a summary's decisions/s over its rounds, or '' for one round. */
export function spread(summary: Summary): string {
  const values = summary.runs.map((r) => r.perSecond);
  if (values.length < 2) return '';
  return `${count(Math.min(...values))}–${count(Math.max(...values))}`;
}

/** "Not run" text for a section absent from a results file. */
export function notRun(title: string): string[] {
  return [`## ${title}`, '', 'Not run in this benchmark.', ''];
}
