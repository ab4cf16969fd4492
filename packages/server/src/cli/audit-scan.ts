// The walk behind `sluice audit`: SCAN on every primary, TYPE and PTTL per key, judged by policy, fixed when asked.
import type { Redis } from 'ioredis';
import type { Policy } from 'sluice';
import { fixFor, judge, judgeStored, limiterOf, storedOf } from './audit-judge.js';
import { type AuditGroup, type Finding, OTHER, PROBLEMS, type Problem, perSecond } from './audit-report.js';
import { sleep } from './command.js';
import { CliError } from './errors.js';
import { formatNumber, Progress } from './output.js';
import type { Connection } from './redis.js';

/** What the walk needs, parsed from the command line and the config. */
export interface ScanOptions {
  readonly prefix: string;
  readonly match: string;
  /** Limiter name -> policy, from the user's config only: empty when there is none. */
  readonly policies: ReadonlyMap<string, Policy>;
  /** The TTL `--fix` gives keys without one; undefined without `--fix`. */
  readonly fixTtlMs: number | undefined;
  readonly count: number;
  /** Keys per second per primary; 0 for no limit. */
  readonly rate: number;
  /** Stop after this many keys; 0 for no limit. */
  readonly maxKeys: number;
  /** Findings listed per limiter and problem in the text report. */
  readonly show: number;
}

export interface ScanResult {
  readonly scanned: number;
  readonly elapsedMs: number;
  /** `complete`, or why the walk stopped early. */
  readonly ended: 'complete' | 'interrupted' | 'max-keys';
  /** By limiter name, `(other keys)` last. */
  readonly groups: readonly AuditGroup[];
  readonly findings: readonly Finding[];
}

/**
 * How far a SCAN has come, from its cursor. Redis walks its hash table in reverse-binary order of
 * bucket indexes, so the cursor's bits reversed over 64 bits give the share of buckets already
 * visited, whatever the table size. Only drives the progress bar.
 */
export function scanFraction(cursor: string): number {
  let value = BigInt(cursor);
  let reversed = 0n;
  for (let i = 0; i < 64; i++) {
    reversed = (reversed << 1n) | (value & 1n);
    value >>= 1n;
  }
  return Number(reversed) / 2 ** 64;
}

/**
 * Spaces SCAN calls so that the keys they return come at most `rate` per second, steadily: each
 * batch of n keys is given n / rate seconds from when the previous one's time ran out, or from
 * now if that is later, so a slow call earns no credit for a burst after it.
 */
export class Pacer {
  #nextMs: number | undefined;

  constructor(
    readonly rate: number,
    readonly now: () => number = () => performance.now(),
  ) {}

  /** Records a batch of `keys` that will be followed by another call; returns the wait before it, in ms. */
  waitAfter(keys: number): number {
    const now = this.now();
    this.#nextMs = Math.max(this.#nextMs ?? now, now) + (keys * 1000) / this.rate;
    return this.#nextMs - now;
  }
}

/** `host:port` of a primary, as the report names it. */
export function primaryName(node: Redis): string {
  const { host, port } = node.options;
  return `${host?.includes(':') ? `[${host}]` : host}:${port}`;
}

/** TYPE and PTTL of each key, in one round trip. */
async function inspectKeys(
  node: Redis,
  keys: readonly string[],
): Promise<Array<{ type: string; ttlMs: number }>> {
  const pipeline = node.pipeline();
  for (const key of keys) pipeline.type(key).pttl(key);
  const replies = (await pipeline.exec()) ?? [];
  return keys.map((_, i) => {
    const [typeError, type] = replies[2 * i] ?? [null, 'none'];
    const [ttlError, ttl] = replies[2 * i + 1] ?? [null, -2];
    if (typeError !== null || ttlError !== null) throw typeError ?? ttlError;
    return { type: String(type), ttlMs: Number(ttl) };
  });
}

async function applyFixes(
  node: Redis,
  fixes: ReadonlyArray<{ finding: Finding; args: Array<string | number> }>,
  groupOf: (name: string) => AuditGroup,
): Promise<void> {
  const pipeline = node.pipeline();
  for (const { args } of fixes) pipeline.call('PEXPIRE', ...args);
  const replies = (await pipeline.exec()) ?? [];
  fixes.forEach(({ finding, args }, i) => {
    const [error, reply] = replies[i] ?? [null, 0];
    if (error !== null) {
      throw new CliError(
        `PEXPIRE ${finding.key} ${args.slice(1).join(' ')} failed: ${error.message} (the NX and LT options need Redis 7.0 or later).`,
      );
    }
    if (reply === 1) {
      finding.fixedTtlMs = Number(args[1]);
      groupOf(finding.limiter).fixed++;
    }
  });
}

function newGroup(name: string, policy: Policy | undefined): AuditGroup {
  return {
    name,
    policy,
    keys: 0,
    noExpiry: 0,
    ttlTooLong: 0,
    unexpectedType: 0,
    fixed: 0,
    shown: { 'no-expiry': [], 'unexpected-type': [], 'ttl-too-long': [] },
  };
}

/** Walks every primary; stops early on `signal` or `--max-keys`. */
export async function scanKeyspace(
  connection: Connection,
  options: ScanOptions,
  signal: AbortSignal,
): Promise<ScanResult> {
  const walk = new Walk(options);
  const progress = new Progress();
  const primaries = connection.primaries;
  try {
    for (let n = 0; n < primaries.length && walk.ended === 'complete'; n++) {
      await scanPrimary(walk, primaries[n] as Redis, signal, (cursor) => {
        const fraction = (n + (cursor === '0' ? 1 : scanFraction(cursor))) / primaries.length;
        progress.update(fraction, walk.progressLine());
      });
    }
    if (signal.aborted) walk.end('interrupted');
  } finally {
    progress.done();
  }
  return walk.result();
}

/** SCAN over one primary, batch after batch, paced to `--rate`; `afterBatch` gets the cursor reached. */
async function scanPrimary(
  walk: Walk,
  node: Redis,
  signal: AbortSignal,
  afterBatch: (cursor: string) => void,
): Promise<void> {
  const { options } = walk;
  const primary = primaryName(node);
  const pacer = options.rate > 0 ? new Pacer(options.rate) : undefined;
  let cursor = '0';
  do {
    const reply = (await node.scan(cursor, 'MATCH', options.match, 'COUNT', options.count)) as [
      string,
      string[],
    ];
    cursor = reply[0];
    const keys = walk.take(reply[1]);
    if (keys.length > 0) await walk.check(node, primary, keys);
    afterBatch(cursor);
    if (signal.aborted) walk.end('interrupted');
    // No wait after a primary's last batch: nothing follows it on that server.
    if (pacer !== undefined && cursor !== '0' && walk.ended === 'complete') {
      await sleep(pacer.waitAfter(keys.length), signal);
    }
  } while (cursor !== '0' && walk.ended === 'complete');
}

/** What the walk has found so far: keys by limiter, findings, counts, and why it ended. */
class Walk {
  readonly #groups = new Map<string, AuditGroup>();
  /** SCAN may return a key twice (while the table grows); it is counted once. */
  readonly #flagged = new Set<string>();
  readonly #findings: Finding[] = [];
  readonly #started = Date.now();
  #scanned = 0;
  #returned = 0;
  #ended: ScanResult['ended'] = 'complete';

  constructor(readonly options: ScanOptions) {}

  get ended(): ScanResult['ended'] {
    return this.#ended;
  }

  end(reason: ScanResult['ended']): void {
    this.#ended = reason;
  }

  /** The keys of a SCAN reply the walk takes, up to `--max-keys` in all. */
  take(keys: string[]): string[] {
    const { maxKeys } = this.options;
    let taken = keys;
    if (maxKeys > 0 && this.#returned + keys.length >= maxKeys) {
      taken = keys.slice(0, maxKeys - this.#returned);
      this.#ended = 'max-keys';
    }
    this.#returned += taken.length;
    return taken;
  }

  /** Checks a batch of keys in one round trip, and fixes what `--fix` may fix in another. */
  async check(node: Redis, primary: string, keys: readonly string[]): Promise<void> {
    const checked = await inspectKeys(node, keys);
    const { fixTtlMs } = this.options;
    const fixes: Array<{ finding: Finding; args: Array<string | number> }> = [];
    keys.forEach((key, i) => {
      const { type, ttlMs } = checked[i] as { type: string; ttlMs: number };
      const finding = this.#judge(key, type, ttlMs, primary);
      const args = finding === undefined || fixTtlMs === undefined ? undefined : fixFor(finding, fixTtlMs);
      if (finding !== undefined && args !== undefined) fixes.push({ finding, args });
    });
    if (fixes.length > 0) await applyFixes(node, fixes, (name) => this.#groupOf(name));
  }

  progressLine(): string {
    const rate = perSecond(this.#scanned, Date.now() - this.#started);
    return `audit: ${formatNumber(this.#scanned)} keys scanned (${formatNumber(rate)} keys/s), ${formatNumber(this.#findings.length)} found`;
  }

  result(): ScanResult {
    const groups = [...this.#groups.values()].sort((a, b) =>
      a.name === OTHER ? 1 : b.name === OTHER ? -1 : a.name.localeCompare(b.name),
    );
    const elapsedMs = Date.now() - this.#started;
    return { scanned: this.#scanned, elapsedMs, ended: this.#ended, groups, findings: this.#findings };
  }

  /** Counts a key and records what is wrong with it, once; the finding, when new. */
  #judge(key: string, type: string, ttlMs: number, primary: string): Finding | undefined {
    // Gone between SCAN and the check: expired, as it should.
    if (type === 'none' || ttlMs === -2) return undefined;
    this.#scanned++;
    const stored = storedOf(key, this.options.prefix);
    const name = stored?.name ?? limiterOf(key, this.options.prefix);
    const group = this.#groupOf(name ?? OTHER);
    group.keys++;
    const finding =
      stored === undefined
        ? judge(key, name, group.policy, type, ttlMs, primary)
        : judgeStored(key, stored.name, stored.kind, type, ttlMs, primary);
    if (finding === undefined || this.#flagged.has(key)) return undefined;
    this.#flagged.add(key);
    this.#findings.push(finding);
    if (finding.problems.includes('no-expiry')) group.noExpiry++;
    if (finding.problems.includes('ttl-too-long')) group.ttlTooLong++;
    if (finding.problems.includes('unexpected-type')) group.unexpectedType++;
    const listed = group.shown[PROBLEMS.find((p) => finding.problems.includes(p)) as Problem];
    if (listed.length < this.options.show) listed.push(finding);
    return finding;
  }

  #groupOf(name: string): AuditGroup {
    let group = this.#groups.get(name);
    if (group === undefined) {
      group = newGroup(name, this.options.policies.get(name));
      this.#groups.set(name, group);
    }
    return group;
  }
}
