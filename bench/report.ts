// Turns a results file into BENCHMARKS.md: the targets met or not, then every table behind them.
import { existsSync, readFileSync } from 'node:fs';
import { PAIRINGS } from './contenders.js';
import type { DenyCacheRecord } from './deny-cache.js';
import type { FairnessRecord } from './fairness.js';
import { median } from './load.js';
import type { Machine, Versions } from './machine.js';
import type { MemoryRecord, SlidingLogEntryRecord } from './memory.js';
import type { RunRecord, Summary } from './race.js';

export interface Settings {
  readonly rounds: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly concurrency: number;
  readonly identifiers: number;
  readonly limit: number;
  readonly windowMs: number;
}

/** Everything one `npm run bench` measured; sections not run are absent. */
export interface Results {
  readonly date: string;
  readonly quick: boolean;
  readonly machine: Machine;
  readonly versions: Versions;
  readonly settings: Settings;
  readonly redis?: Summary[];
  /** GCRA at several maxBatch values. */
  readonly batch?: Summary[];
  readonly memory?: MemoryRecord[];
  readonly slidingLogEntry?: SlidingLogEntryRecord;
  readonly memoryStore?: Summary[];
  readonly denyCache?: DenyCacheRecord[];
  readonly fairness?: FairnessRecord[];
  readonly targets?: Target[];
}

export interface Target {
  readonly target: string;
  readonly measured: string;
  /** null when the figure could not be measured in this run. */
  readonly met: boolean | null;
}

const SEED = 'seed.tokenBucket';
const RLF_MEMORY = 'rlf.RateLimiterMemory';

function byId<T extends { readonly id: string }>(rows: readonly T[] | undefined, id: string): T | undefined {
  return rows?.find((row) => row.id === id);
}

/** The fastest of a sluice algorithm's paired peers, by median decisions per second. */
export function bestPeer(redis: readonly Summary[], sluiceId: string): Summary | undefined {
  const peers = (PAIRINGS[sluiceId]?.peers ?? [])
    .map((id) => byId(redis, id))
    .filter((s): s is Summary => s !== undefined);
  return peers.sort((a, b) => b.perSecond - a.perSecond)[0];
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

const ratio = (x: number): string => `${x.toFixed(2)}×`;
const pairedText = (p: Paired): string =>
  p.low === p.high ? ratio(p.median) : `${ratio(p.median)} (rounds ${p.low.toFixed(2)}–${ratio(p.high)})`;
const perSecond = (r: RunRecord): number => r.perSecond;
const p99 = (r: RunRecord): number => r.p99Ms ?? Number.NaN;
const scriptUsec = (r: RunRecord): number => r.scriptUsecPerDecision;
const ms = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '–');
const count = (x: number): string => Math.round(x).toLocaleString('en-US');
const mark = (met: boolean | null): string =>
  met === null ? 'not measured' : met ? '**met**' : '**not met**';

export function computeTargets(results: Results): Target[] {
  const targets: Target[] = [];
  const redis = results.redis;
  if (redis !== undefined) {
    for (const sluiceId of Object.keys(PAIRINGS)) {
      const sluice = byId(redis, sluiceId);
      const peer = bestPeer(redis, sluiceId);
      if (sluice === undefined || peer === undefined) continue;
      const speed = paired(sluice, peer, perSecond);
      const latency = paired(sluice, peer, p99);
      targets.push({
        target: `${sluice.label}: ≥ 2× the decisions/s of ${peer.library} ${peer.label}, p99 no worse`,
        measured: `${pairedText(speed)}; p99 ${ratio(latency.median)} of the peer's (${ms(sluice.p99Ms)} vs ${ms(peer.p99Ms)} ms)`,
        met: speed.median >= 2 && latency.median <= 1,
      });
    }
    const seed = byId(redis, SEED);
    if (seed !== undefined) {
      for (const [label, most] of [
        ['tokenBucket', 0.7],
        ['gcra', 0.7],
        ['fixedWindow', 0.35],
      ] as const) {
        const sluice = byId(redis, `sluice.${label}`);
        if (sluice === undefined) continue;
        const share = paired(sluice, seed, scriptUsec);
        targets.push({
          target: `${label}: Redis-side µs per decision ≤ ${most}× the seed's token bucket`,
          measured: `${pairedText(share)} (${sluice.scriptUsecPerDecision.toFixed(2)} vs ${seed.scriptUsecPerDecision.toFixed(2)} µs)`,
          met: share.median <= most,
        });
      }
    }
  }
  const memoryStore = results.memoryStore;
  const rlfMemory = byId(memoryStore, RLF_MEMORY);
  // RateLimiterMemory is a fixed window counter: the target pairs it with the same kind, as on Redis.
  const sluiceMemory = byId(memoryStore, 'sluice.memory.fixedWindow');
  if (sluiceMemory !== undefined && rlfMemory !== undefined) {
    const speed = paired(sluiceMemory, rlfMemory, perSecond);
    targets.push({
      target: 'Memory store, fixedWindow: ≥ 2× the decisions/s of RateLimiterMemory',
      measured: pairedText(speed),
      met: speed.median >= 2,
    });
  }
  for (const deny of results.denyCache ?? []) {
    targets.push({
      target: `Deny cache (${deny.concurrency} in flight): ≥ 95% of Redis calls saved, same allowed count`,
      measured: `${(deny.savedShare * 100).toFixed(2)}% saved; allowed ${deny.with.allowed} with, ${deny.without.allowed} without`,
      met: deny.savedShare >= 0.95 && deny.sameAllowed,
    });
  }
  for (const label of ['fixedWindow', 'gcra', 'tokenBucket']) {
    const row = byId(results.memory, `sluice.${label}`);
    if (row === undefined) continue;
    targets.push({
      target: `${label}: ≤ 100 bytes of Redis memory per identifier (MEMORY USAGE)`,
      measured: `${row.bytesPerIdentifier.toFixed(1)} bytes`,
      met: row.bytesPerIdentifier <= 100,
    });
  }
  return targets;
}

function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  const align = header.map((_, i) => (i === 0 ? '---' : '---:'));
  return [line(header), line(align), ...rows.map(line)].join('\n');
}

function spread(summary: Summary): string {
  const values = summary.runs.map((r) => r.perSecond);
  if (values.length < 2) return '';
  return `${count(Math.min(...values))}–${count(Math.max(...values))}`;
}

function redisSection(results: Results): string[] {
  const redis = results.redis;
  if (redis === undefined)
    return ['## Throughput and latency on Redis', '', 'Not run in this benchmark.', ''];
  const seed = byId(redis, SEED);
  const rows = redis.map((s) => {
    const peer = s.library === 'sluice' ? bestPeer(redis, s.id.replace(/\.maxBatch\d+$/, '')) : undefined;
    return [
      `${s.library} ${s.label}`,
      count(s.perSecond),
      spread(s),
      ms(s.p50Ms),
      ms(s.p99Ms),
      s.decisionsPerCall.toFixed(1),
      s.scriptUsecPerDecision.toFixed(2),
      seed === undefined ? '–' : ratio(paired(s, seed, scriptUsec).median),
      s.serverCpuUsecPerDecision.toFixed(2),
      peer === undefined ? '' : `${ratio(paired(s, peer, perSecond).median)} ${peer.library} ${peer.label}`,
    ];
  });
  return [
    '## Throughput and latency on Redis',
    '',
    `${results.settings.concurrency} decisions in flight over ${count(results.settings.identifiers)} distinct identifiers, one shared ioredis client, ` +
      `median of ${results.settings.rounds} interleaved rounds of ${results.settings.durationMs / 1000} s each (after ${results.settings.warmupMs / 1000} s of warm-up); ` +
      `every run starts from an empty database. Policies allow ${results.settings.limit} per ${results.settings.windowMs / 1000} s (token buckets: ${results.settings.limit} refilling 20 per second), so no decision is denied: every contender does the same work (read, decide, write).`,
    '',
    table(
      [
        'contender',
        'decisions/s',
        'range over rounds',
        'p50 ms',
        'p99 ms',
        'decisions per script call',
        'script µs/decision',
        '× seed script (median per round)',
        'server CPU µs/decision',
        'vs fastest peer of the kind (median per round)',
      ],
      rows,
    ),
    '',
    '"script µs/decision" is the `usec` that `INFO commandstats` gives EVAL, EVALSHA and FCALL (which includes the commands the scripts run), ' +
      'reset with `CONFIG RESETSTAT` before each run and divided by decisions, not calls (sluice decides many keys per call). ' +
      '"server CPU" is the growth of `used_cpu_user + used_cpu_sys` of the redis-server process over the run, per decision: it adds what commandstats leaves out (reading and parsing commands, writing replies, the event loop).',
    '',
    '### Pairings',
    '',
    ...Object.entries(PAIRINGS).map(([id, pairing]) => {
      const names = pairing.peers.map((peer) => {
        const row = byId(redis, peer);
        return row === undefined ? peer : `${row.library} ${row.label}`;
      });
      return `- sluice ${id.replace('sluice.', '')}: ${names.join(', ')}: ${pairing.why}.`;
    }),
    '',
  ];
}

function batchSection(results: Results): string[] {
  const rows = results.batch;
  if (rows === undefined) return [];
  return [
    '## Coalescing: maxBatch',
    '',
    `GCRA with the decisions of one tick coalesced into calls of at most \`maxBatch\` keys (1 turns coalescing off), ${results.settings.concurrency} in flight; ` +
      'median of 2 rounds of 1.5 s. Every key is still decided atomically and on its own, in the order of the requests.',
    '',
    table(
      [
        'maxBatch',
        'decisions/s',
        'p50 ms',
        'p99 ms',
        'decisions per call',
        'script µs/decision',
        'server CPU µs/decision',
      ],
      rows.map((s) => [
        /maxBatch(\d+)/.exec(s.id)?.[1] ?? s.id,
        count(s.perSecond),
        ms(s.p50Ms),
        ms(s.p99Ms),
        s.decisionsPerCall.toFixed(1),
        s.scriptUsecPerDecision.toFixed(2),
        s.serverCpuUsecPerDecision.toFixed(2),
      ]),
    ),
    '',
  ];
}

function memorySection(results: Results): string[] {
  const memory = results.memory;
  if (memory === undefined) return [];
  const entry = results.slidingLogEntry;
  return [
    '## Redis memory per identifier',
    '',
    `One decision for each of ${count(results.settings.identifiers)} identifiers, then \`MEMORY USAGE <key> SAMPLES 0\` over a sample of keys (it counts the key, the value and the main table's entry, not the expiry entry); ` +
      'the growth of `used_memory` per identifier adds the expiry entry and the hash tables.',
    '',
    table(
      [
        'contender',
        'keys per identifier',
        'MEMORY USAGE bytes/identifier',
        'used_memory growth bytes/identifier',
        'sample key',
      ],
      memory.map((m) => [
        `${m.library} ${m.label}`,
        m.keysPerIdentifier.toFixed(2),
        m.bytesPerIdentifier.toFixed(1),
        m.usedMemoryPerIdentifier.toFixed(1),
        `\`${m.sampleKey}\``,
      ]),
    ),
    '',
    ...(entry === undefined
      ? []
      : [
          `Sliding log, per entry: ${entry.listpackBytesPerEntry.toFixed(1)} bytes while the sorted set is a listpack (up to 128 entries, \`zset-max-listpack-entries\`), ` +
            `${entry.skiplistBytesPerEntry.toFixed(1)} bytes once it is a skiplist (1 000 entries, the ceiling).`,
          '',
        ]),
  ];
}

function memoryStoreSection(results: Results): string[] {
  const rows = results.memoryStore;
  if (rows === undefined) return [];
  const rlf = byId(rows, RLF_MEMORY);
  return [
    '## Memory store',
    '',
    `The same ${results.settings.concurrency} in flight over ${count(results.settings.identifiers)} identifiers, in process (no latency clock: reading it would cost as much as a decision); ` +
      `median of ${rows[0]?.runs.length ?? 0} interleaved rounds of 1 s.`,
    '',
    table(
      ['contender', 'decisions/s', 'range over rounds', '× RateLimiterMemory (median per round)'],
      rows.map((s) => [
        `${s.library} ${s.label}`,
        count(s.perSecond),
        spread(s),
        rlf === undefined ? '–' : ratio(paired(s, rlf, perSecond).median),
      ]),
    ),
    '',
  ];
}

function denyCacheSection(results: Results): string[] {
  const measured = results.denyCache;
  const first = measured?.[0];
  if (measured === undefined || first === undefined) return [];
  const lines = ['## Deny cache', ''];
  lines.push(
    `One identifier sends ${count(first.requests)} requests, 100× its limit (fixedWindow, ${first.limit} per hour), with and without \`denyCache: true\`. ` +
      '"store decisions" are the decisions that reached Redis; "script calls" are the coalesced calls that carried them.',
    '',
    table(
      [
        'in flight',
        'store decisions without',
        'with',
        'saved',
        'script calls without',
        'with',
        'allowed without',
        'with',
      ],
      measured.map((r) => [
        String(r.concurrency),
        count(r.without.storeDecisions),
        count(r.with.storeDecisions),
        `${(r.savedShare * 100).toFixed(2)}%`,
        count(r.without.scriptCalls),
        count(r.with.scriptCalls),
        String(r.without.allowed),
        String(r.with.allowed),
      ]),
    ),
    '',
  );
  return lines;
}

function fairnessSection(results: Results): string[] {
  const rows = results.fairness;
  if (rows === undefined) return [];
  const uniform = results.redis;
  return [
    '## Hot and cold keys',
    '',
    `Half the decisions go to 10 hot identifiers (far past their limit, so mostly denied), half to ${count(results.settings.identifiers)} cold ones; ` +
      `${results.settings.concurrency} in flight. A coalescing store must not make the cold keys wait behind the hot ones: compare the cold p99 with the uniform run above.`,
    '',
    table(
      [
        'contender',
        'decisions/s',
        'hot p50 ms',
        'hot p99 ms',
        'cold p50 ms',
        'cold p99 ms',
        'uniform p99 ms',
        'hot allowed',
      ],
      rows.map((f) => [
        `${f.library} ${f.label}`,
        count(f.perSecond),
        ms(f.hotP50Ms),
        ms(f.hotP99Ms),
        ms(f.coldP50Ms),
        ms(f.coldP99Ms),
        ms(byId(uniform, f.id)?.p99Ms ?? Number.NaN),
        `${(f.hotAllowedShare * 100).toFixed(1)}%`,
      ]),
    ),
    '',
  ];
}

/** BENCHMARKS.md for a results file; `notesPath` holds the hand-written analysis appended at the end. */
export function renderMarkdown(results: Results, resultsPath: string, notesPath: string): string {
  const targets = computeTargets(results);
  const { machine, versions } = results;
  const notes = existsSync(notesPath) ? readFileSync(notesPath, 'utf8').trim() : '';
  return [
    `<!-- Generated by \`npm run bench\` (bench/run.ts, bench/report.ts) from ${resultsPath}; regenerate without a run by \`npm run bench -- --report ${resultsPath}\`. Edit bench/notes.md, not this file. -->`,
    '# Benchmarks',
    '',
    `Measured ${results.date}${results.quick ? ' (quick run: one short round, noisier)' : ''} by \`npm run bench\`, which starts its own redis-server on 127.0.0.1 and writes \`${resultsPath}\`.`,
    '',
    `- Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB; ${machine.os}; load average ${machine.loadAverageAtStart} when the run started (the machine is shared).`,
    `- Node.js ${machine.node}; Redis ${machine.redis} (loopback, default configuration, no persistence).`,
    `- sluice ${versions.sluice} (commit ${versions.commit}); ioredis ${versions.ioredis}; rate-limiter-flexible ${versions['rate-limiter-flexible']}; @upstash/ratelimit ${versions['@upstash/ratelimit']}.`,
    '',
    '## Targets',
    '',
    'Every ratio is taken within a round, between two contenders that ran less than a minute apart, and the median over the rounds is the figure (the range over rounds follows it). ' +
      'The throughput targets pair each sluice algorithm with the fastest peer of the same kind (its median decisions/s); the memory store target pairs the fixed window with RateLimiterMemory, a fixed window counter.',
    '',
    table(
      ['target', 'measured', ''],
      targets.map((t) => [t.target, t.measured, mark(t.met)]),
    ),
    '',
    ...redisSection(results),
    ...batchSection(results),
    ...memorySection(results),
    ...memoryStoreSection(results),
    ...denyCacheSection(results),
    ...fairnessSection(results),
    ...(notes === '' ? [] : [notes, '']),
  ].join('\n');
}
