// Text output: aligned tables, readable numbers, and the progress line of long scans.

/** `100000` -> `100,000`; fractions keep `digits` decimals. */
export function formatNumber(value: number, digits = 0): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Milliseconds as the largest unit that reads well: `850 ms`, `12.5 s`, `3 min 20 s`, `2 h 5 min`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${formatNumber(ms / 1000, ms < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) {
    const seconds = Math.round((ms % 60_000) / 1000);
    return seconds === 0 ? `${minutes} min` : `${minutes} min ${seconds} s`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
  return `${formatNumber(ms / 86_400_000, 1)} days`;
}

/**
 * Aligns rows into columns. Columns whose cells all look numeric are right-aligned.
 * The first row is the header.
 */
export function table(rows: ReadonlyArray<ReadonlyArray<string>>): string {
  const widths: number[] = [];
  const numeric: boolean[] = [];
  rows.forEach((row, r) => {
    row.forEach((cell, c) => {
      widths[c] = Math.max(widths[c] ?? 0, cell.length);
      if (r > 0) numeric[c] = (numeric[c] ?? true) && /^[-+]?[\d,.]+( ?[a-zµ%/]+)?$|^-$/.test(cell);
    });
  });
  return rows
    .map((row) =>
      row
        .map((cell, c) => (numeric[c] === true ? cell.padStart(widths[c] ?? 0) : cell.padEnd(widths[c] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** A progress bar: `[#########-----------]  45%`. */
export function progressBar(fraction: number, width = 24): string {
  const clamped = Math.min(1, Math.max(0, Number.isFinite(fraction) ? fraction : 0));
  const filled = Math.round(clamped * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(Math.floor(clamped * 100)).padStart(3)}%`;
}

/**
 * Reports progress on stderr: a bar redrawn in place on a terminal, a plain line every few seconds
 * otherwise (cron mail and CI logs do not want carriage returns).
 */
export class Progress {
  readonly #tty: boolean;
  readonly #intervalMs: number;
  #last = 0;
  #drawn = false;

  constructor(
    readonly stream: NodeJS.WriteStream = process.stderr,
    options: { intervalMs?: number } = {},
  ) {
    this.#tty = stream.isTTY === true;
    this.#intervalMs = options.intervalMs ?? (this.#tty ? 100 : 2000);
  }

  /** Shows `line` (with a bar of `fraction` on a terminal) unless one was shown very recently. */
  update(fraction: number, line: string, now = Date.now()): void {
    if (now - this.#last < this.#intervalMs) return;
    this.#last = now;
    if (this.#tty) {
      this.stream.write(`\r\x1b[2K${progressBar(fraction)}  ${line}`);
      this.#drawn = true;
    } else {
      this.stream.write(`${line}\n`);
    }
  }

  /** Clears the bar, so what follows starts on a clean line. */
  done(): void {
    if (this.#drawn) this.stream.write('\r\x1b[2K');
    this.#drawn = false;
  }
}
