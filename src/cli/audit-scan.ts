// The walk behind `sluice audit`: SCAN on every primary, TYPE and PTTL per key, judged by policy, fixed when asked.
import type { Redis } from 'ioredis';
import type { Policy } from '../index.js';
import { type Finding, type Group, OTHER, PROBLEMS, type Problem, perSecond } from './audit-report.js';
import { sleep } from './command.js';
import { maxTtlMs, stateType } from './config.js';
import { CliError } from './errors.js';
import { formatNumber, Progress } from './output.js';
import type { Connection } from './redis.js';

/**
 * A TTL counts as "far beyond" its policy above twice the longest the policy sets: the scripts never
 * set more than the longest, and the slack keeps a recent policy change from raising an alarm.
 */
export const TTL_SLACK_FACTOR = 2;

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
  readonly groups: readonly Group[];
  readonly findings: readonly Finding[];
}

/** The limiter name in `<prefix>:<name>:{<identifier>}` (or `...:{<tag>}:<identifier>`), if the key has that shape. */
export function limiterOf(key: string, prefix: string): string | undefined {
  if (!key.startsWith(`${prefix}:`)) return undefined;
  const rest = key.slice(prefix.length + 1);
  const at = rest.indexOf(':{');
  if (at < 1) return undefined;
  const name = rest.slice(0, at);
  return /[{}]/.test(name) ? undefined : name;
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

/** What is wrong with one key, if anything; a TTL is judged only against a policy from the user's config. */
export function judge(
  key: string,
  name: string | undefined,
  policy: Policy | undefined,
  type: string,
  ttlMs: number,
  primary: string,
): Finding | undefined {
  const problems: Problem[] = [];
  let expectedType: string | undefined;
  if (name !== undefined) {
    expectedType = policy === undefined ? 'string or zset' : stateType(policy);
    const ok = policy === undefined ? type === 'string' || type === 'zset' : type === expectedType;
    if (!ok) problems.push('unexpected-type');
  }
  const longest = policy === undefined ? undefined : maxTtlMs(policy);
  if (ttlMs === -1) problems.push('no-expiry');
  else if (longest !== undefined && ttlMs > longest * TTL_SLACK_FACTOR) problems.push('ttl-too-long');
  if (problems.length === 0) return undefined;
  return { key, limiter: name ?? OTHER, primary, problems, type, ttlMs, expectedType, maxTtlMs: longest };
}

/**
 * The PEXPIRE `--fix` sends for a finding, if any. A key without an expiry gets `--ttl`, capped at
 * its policy's longest (NX: only if it still has none). A TTL is only ever cut (LT) to the longest
 * its policy sets, and only when that policy is known from the user's config.
 */
export function fixFor(finding: Finding, fixTtlMs: number): Array<string | number> | undefined {
  if (finding.problems.includes('no-expiry')) {
    const ttl = finding.maxTtlMs === undefined ? fixTtlMs : Math.min(fixTtlMs, finding.maxTtlMs);
    return [finding.key, ttl, 'NX'];
  }
  if (finding.problems.includes('ttl-too-long') && finding.maxTtlMs !== undefined) {
    return [finding.key, finding.maxTtlMs, 'LT'];
  }
  return undefined;
}

async function applyFixes(
  node: Redis,
  fixes: ReadonlyArray<{ finding: Finding; args: Array<string | number> }>,
  groupOf: (name: string) => Group,
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

function newGroup(name: string, policy: Policy | undefined): Group {
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
  const groups = new Map<string, Group>();
  const groupOf = (name: string): Group => {
    let group = groups.get(name);
    if (group === undefined) {
      group = newGroup(name, options.policies.get(name));
      groups.set(name, group);
    }
    return group;
  };
  const flagged = new Set<string>();
  const findings: Finding[] = [];
  const progress = new Progress();
  const started = Date.now();
  let scanned = 0;
  let returned = 0;
  let ended: ScanResult['ended'] = 'complete';
  const primaries = connection.primaries;
  try {
    for (let n = 0; n < primaries.length && ended === 'complete'; n++) {
      const node = primaries[n] as Redis;
      const primary = primaryName(node);
      const pacer = options.rate > 0 ? new Pacer(options.rate) : undefined;
      let cursor = '0';
      do {
        const reply = (await node.scan(cursor, 'MATCH', options.match, 'COUNT', options.count)) as [
          string,
          string[],
        ];
        cursor = reply[0];
        let keys = reply[1];
        if (options.maxKeys > 0 && returned + keys.length >= options.maxKeys) {
          keys = keys.slice(0, options.maxKeys - returned);
          ended = 'max-keys';
        }
        returned += keys.length;
        const checked = keys.length === 0 ? [] : await inspectKeys(node, keys);
        const fixes: Array<{ finding: Finding; args: Array<string | number> }> = [];
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i] as string;
          const { type, ttlMs } = checked[i] as { type: string; ttlMs: number };
          // Gone between SCAN and the check: expired, as it should.
          if (type === 'none' || ttlMs === -2) continue;
          scanned++;
          const name = limiterOf(key, options.prefix);
          const group = groupOf(name ?? OTHER);
          group.keys++;
          const finding = judge(key, name, group.policy, type, ttlMs, primary);
          // SCAN may return a key twice (while the table grows); count it once.
          if (finding === undefined || flagged.has(key)) continue;
          flagged.add(key);
          findings.push(finding);
          if (finding.problems.includes('no-expiry')) group.noExpiry++;
          if (finding.problems.includes('ttl-too-long')) group.ttlTooLong++;
          if (finding.problems.includes('unexpected-type')) group.unexpectedType++;
          const listed = group.shown[PROBLEMS.find((p) => finding.problems.includes(p)) as Problem];
          if (listed.length < options.show) listed.push(finding);
          const args = options.fixTtlMs === undefined ? undefined : fixFor(finding, options.fixTtlMs);
          if (args !== undefined) fixes.push({ finding, args });
        }
        if (fixes.length > 0) await applyFixes(node, fixes, groupOf);
        const fraction = (n + (cursor === '0' ? 1 : scanFraction(cursor))) / primaries.length;
        progress.update(
          fraction,
          `audit: ${formatNumber(scanned)} keys scanned (${formatNumber(perSecond(scanned, Date.now() - started))} keys/s), ${formatNumber(findings.length)} found`,
        );
        if (signal.aborted) ended = 'interrupted';
        // No wait after a primary's last batch: nothing follows it on that server.
        if (pacer !== undefined && cursor !== '0' && ended === 'complete') {
          await sleep(pacer.waitAfter(keys.length), signal);
        }
      } while (cursor !== '0' && ended === 'complete');
    }
    if (signal.aborted) ended = 'interrupted';
  } finally {
    progress.done();
  }
  const ordered = [...groups.values()].sort((a, b) =>
    a.name === OTHER ? 1 : b.name === OTHER ? -1 : a.name.localeCompare(b.name),
  );
  return { scanned, elapsedMs: Date.now() - started, ended, groups: ordered, findings };
}
