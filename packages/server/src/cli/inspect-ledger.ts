// `sluice inspect --global-redis`: an identifier's global budget as the ledger holds it, per region.
import { formatDuration } from './output.js';
import { type Connection, connect } from './redis.js';

/** One region's part of the ledger: per window (windows) or its leases and demand (buckets). */
export interface LedgerRegion {
  readonly region: string;
  /** Window id -> units granted beyond the floor, and units the region reported asked. */
  readonly windows: Record<string, { granted: number; demand: number }>;
  /** Leases still stored: capacity beyond the floor, and when the ledger lets each go (epoch ms). */
  readonly leases: ReadonlyArray<{ level: number; expiresAtMs: number }>;
  /**
   * A bucket's demand as the region reported it, by periods of half a lease: units asked in the
   * period that starts at `periodStartMs` (epoch ms), and in the one before; what the ledger sizes
   * the region's next lease by.
   */
  readonly asked?: { readonly periodStartMs: number; readonly units: number; readonly previousUnits: number };
}

/** What `inspect --global-redis` adds to the report. */
export interface LedgerReport {
  readonly key: string;
  readonly ttlMs: number | null;
  readonly regions: readonly LedgerRegion[];
}

/** The regions of the flags' comma-separated list, or numbers as the ledger keeps them. */
function regionName(names: readonly string[] | undefined, index: number): string {
  return names?.[index] ?? `region ${index}`;
}

type Parsed = { -readonly [K in keyof LedgerRegion]: LedgerRegion[K] };

/**
 * The ledger's fields, per region: a window budget's `g:<window>:<region>` (granted) and
 * `d:<window>:<region>` (asked); a bucket's leases `l:<region>:<k>` until `x:<region>:<k>`, and its
 * demand, `d:<region>` units in period `i:<region>` and `o:<region>` in the one before.
 */
function parseFields(
  flat: readonly string[],
  names: readonly string[] | undefined,
  periodMs: number,
): LedgerRegion[] {
  const regions = new Map<number, Omit<Parsed, 'region'>>();
  const at = (index: number) => {
    let entry = regions.get(index);
    if (entry === undefined) {
      entry = { windows: {}, leases: [] };
      regions.set(index, entry);
    }
    return entry;
  };
  const fields = new Map<string, number>();
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i] as string, Number(flat[i + 1]));
  for (const [name, value] of fields) {
    const window = /^([gd]):(\d+):(\d+)$/.exec(name);
    if (window !== null) {
      const windows = at(Number(window[3])).windows;
      const entry = windows[window[2] as string] ?? { granted: 0, demand: 0 };
      if (window[1] === 'g') entry.granted = value;
      else entry.demand = value;
      windows[window[2] as string] = entry;
      continue;
    }
    const lease = /^l:(\d+):(\d+)$/.exec(name);
    if (lease !== null) {
      const expiresAtMs = fields.get(`x:${lease[1]}:${lease[2]}`) ?? 0;
      (at(Number(lease[1])).leases as Array<{ level: number; expiresAtMs: number }>).push({
        level: value,
        expiresAtMs,
      });
      continue;
    }
    const period = /^i:(\d+)$/.exec(name);
    if (period !== null) {
      const region = period[1] as string;
      at(Number(region)).asked = {
        periodStartMs: value * periodMs,
        units: fields.get(`d:${region}`) ?? 0,
        previousUnits: fields.get(`o:${region}`) ?? 0,
      };
    }
  }
  return [...regions.keys()]
    .sort((a, b) => a - b)
    .map((index) => ({
      ...(regions.get(index) as Omit<LedgerRegion, 'region'>),
      region: regionName(names, index),
    }));
}

/**
 * Reads the ledger of `<prefix>:budget:<limiter>:{<identifier>}` from the global store; `leaseMs`,
 * the budget's lease, gives a bucket's periods of demand (half a lease each).
 */
export async function readLedger(
  url: string,
  timeoutMs: number,
  key: string,
  names: readonly string[] | undefined,
  leaseMs: number,
): Promise<LedgerReport> {
  const connection: Connection = await connect(url, timeoutMs);
  try {
    const flat = (await connection.client.hgetall(key)) as Record<string, string>;
    const ttlMs = Number(await connection.client.pttl(key));
    return {
      key,
      ttlMs: ttlMs >= 0 ? ttlMs : null,
      regions: parseFields(Object.entries(flat).flat(), names, leaseMs / 2),
    };
  } finally {
    await connection.close();
  }
}

/** The ledger in words, one line per region. */
export function ledgerText(report: LedgerReport, nowMs: number): string[] {
  if (report.regions.length === 0)
    return [`ledger   ${report.key}: none (no region holds more than its floor)`];
  const lines = [
    `ledger   ${report.key}, TTL ${report.ttlMs === null ? 'none' : formatDuration(report.ttlMs)}`,
  ];
  for (const region of report.regions) {
    const windows = Object.entries(region.windows).map(
      ([id, entry]) => `window ${id}: granted ${entry.granted}, asked ${entry.demand}`,
    );
    const leases = region.leases.map(
      (lease) => `lease ${lease.level} for ${formatDuration(Math.max(0, lease.expiresAtMs - nowMs))}`,
    );
    const { asked } = region;
    const demand =
      asked === undefined
        ? []
        : [
            `asked ${asked.units} in the half lease that began ${formatDuration(Math.max(0, nowMs - asked.periodStartMs))} ago, ${asked.previousUnits} in the one before`,
          ];
    lines.push(`  ${region.region}: ${[...windows, ...leases, ...demand].join('; ') || 'nothing'}`);
  }
  return lines;
}
