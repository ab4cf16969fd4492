// Throughput, latency and Redis-side cost on Redis: sluice against its peers, its own transport floor
// and the classic token-bucket script; and the sweep of maxBatch.
import {
  CLASSIC,
  type Contender,
  classicReference,
  PAIRINGS,
  peersOnRedis,
  SLUICE_POLICIES,
  type SluicePolicy,
  sluiceRedis,
} from './contenders.js';
import {
  byId,
  count,
  ms,
  notRun,
  p99,
  paired,
  pairedText,
  perSecond,
  ratio,
  scriptUsec,
  spread,
  table,
} from './format.js';
import { type RunRecord, race, type Summary } from './race.js';
import { REDIS_FLOOR, redisFloor } from './redis-floor.js';
import type { Section, Target } from './section.js';

/** maxBatch values swept for GCRA (1 is one call per decision; 64 the default). */
const MAX_BATCH_SIZES = [1, 8, 32, 64, 128, 256] as const;

/** The targets against the peers: decisions/s at least this many times the peer's, p99 at most this share. */
const PEER_SPEEDUP = 5;
const PEER_P99_SHARE = 0.5;
/** sluice's coalesced fixed window against the transport floor. */
const FLOOR_SHARE = 0.8;
/** Redis-side µs per decision, at most this share of the classic token-bucket script's. */
const SCRIPT_SHARES = [
  ['tokenBucket', 0.5],
  ['gcra', 0.5],
  ['fixedWindow', 0.25],
] as const;

export function policy(label: string): SluicePolicy {
  const found = SLUICE_POLICIES.find((p) => p.label === label);
  if (found === undefined) throw new Error(`No sluice policy ${label}`);
  return found;
}

/** The fastest of a sluice algorithm's paired peers, by median decisions per second. */
export function bestPeer(redis: readonly Summary[], sluiceId: string): Summary | undefined {
  const peers = (PAIRINGS[sluiceId]?.peers ?? [])
    .map((id) => byId(redis, id))
    .filter((s): s is Summary => s !== undefined);
  return peers.sort((a, b) => b.perSecond - a.perSecond)[0];
}

/**
 * CPU µs of a decision, the client's process and redis-server's together: a ratio of two, the slower
 * over the faster, is a ratio of decisions per CPU-second, which other work on a shared host moves
 * less than decisions/s (the two share the machine's cores).
 */
const cpuPerDecision = (run: RunRecord): number => run.cpuUsecPerDecision + run.serverCpuUsecPerDecision;

/**
 * Rounds of the Redis race: the ratios of one round to the next spread widely on a shared host (one
 * run gave tokenBucket 3.36-8.19x its peer over four rounds), so the median is taken over twice the
 * other sections' rounds.
 */
const REDIS_ROUNDS = 8;

export const redisSection: Section<Summary[]> = {
  name: 'redis',
  async run({ quick, settings, bench, chosen, log }) {
    log('Throughput, latency and Redis-side cost on Redis');
    const client = bench.client;
    // Coalescing off, for the two cheapest scripts: what one call per decision costs sluice.
    const single = ['fixedWindow', 'gcra'].map((label) => sluiceRedis(client, policy(label), 1));
    const contenders: Contender[] = [
      ...SLUICE_POLICIES.map((p) => sluiceRedis(client, p)),
      redisFloor(client),
      ...single,
      ...peersOnRedis(client),
      classicReference(client),
    ];
    return race(bench, chosen(contenders), {
      ...settings,
      rounds: quick ? 1 : Math.max(settings.rounds, REDIS_ROUNDS),
      log,
    });
  },
  targets(redis) {
    const targets: Target[] = [];
    for (const sluiceId of Object.keys(PAIRINGS)) {
      const sluice = byId(redis, sluiceId);
      const peer = bestPeer(redis, sluiceId);
      if (sluice === undefined || peer === undefined) continue;
      const speed = paired(sluice, peer, perSecond);
      const latency = paired(sluice, peer, p99);
      const perCpu = paired(peer, sluice, cpuPerDecision);
      targets.push({
        target: `Redis, ${sluice.label}: ≥ ${PEER_SPEEDUP}× the decisions/s of ${peer.library} ${peer.label}, p99 ≤ ${PEER_P99_SHARE}× its p99`,
        measured: `${pairedText(speed)}; p99 ${ratio(latency.median)} of the peer's (${ms(sluice.p99Ms)} vs ${ms(peer.p99Ms)} ms); per CPU-second of client and server ${pairedText(perCpu)}`,
        met: speed.median >= PEER_SPEEDUP && latency.median <= PEER_P99_SHARE,
      });
    }
    const floor = byId(redis, REDIS_FLOOR);
    const fixed = byId(redis, 'sluice.fixedWindow');
    if (floor !== undefined && fixed !== undefined) {
      const share = paired(fixed, floor, perSecond);
      targets.push({
        target: `Redis, fixedWindow (coalesced): ≥ ${FLOOR_SHARE}× the decisions/s of the transport floor (same batches, trivial script)`,
        measured: `${pairedText(share)} (${count(fixed.perSecond)} vs ${count(floor.perSecond)}/s)`,
        met: share.median >= FLOOR_SHARE,
      });
    }
    const classic = byId(redis, CLASSIC);
    if (classic !== undefined) {
      for (const [label, most] of SCRIPT_SHARES) {
        const sluice = byId(redis, `sluice.${label}`);
        if (sluice === undefined) continue;
        const share = paired(sluice, classic, scriptUsec);
        targets.push({
          target: `Redis, ${label}: Redis-side µs per decision ≤ ${most}× the classic token-bucket script's`,
          measured: `${pairedText(share)} (${sluice.scriptUsecPerDecision.toFixed(2)} vs ${classic.scriptUsecPerDecision.toFixed(2)} µs)`,
          met: share.median <= most,
        });
      }
    }
    return targets;
  },
  render(redis, results) {
    if (redis.length === 0) return notRun('Throughput and latency on Redis');
    const classic = byId(redis, CLASSIC);
    const floor = byId(redis, REDIS_FLOOR);
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
        classic === undefined ? '–' : ratio(paired(s, classic, scriptUsec).median),
        s.serverCpuUsecPerDecision.toFixed(2),
        floor === undefined ? '–' : ratio(paired(s, floor, perSecond).median),
        peer === undefined ? '' : `${ratio(paired(s, peer, perSecond).median)} ${peer.library} ${peer.label}`,
      ];
    });
    const { settings } = results;
    return [
      '## Throughput and latency on Redis',
      '',
      `${settings.concurrency} decisions in flight over ${count(settings.identifiers)} distinct identifiers built per call, one shared ioredis client, ` +
        `median of ${redis[0]?.runs.length ?? 0} interleaved rounds of ${settings.durationMs / 1000} s each (after ${settings.warmupMs / 1000} s of warm-up that reaches every identifier); ` +
        `every run starts from an empty database. Policies allow ${settings.limit} per ${settings.windowMs / 1000} s (token buckets: ${settings.limit} refilling 20 per second), so no decision is denied: every contender does the same work (read, decide, write). ` +
        'The transport floor sends the batches sluice would send (the decisions of a tick, up to 64 keys per call, the same keys and arguments) through the same client, to a script that decides nothing and only returns the reply the script of sluice gives allowed keys (the reset shared by the batch, then one integer per key): what any coalescing client pays for the round trips, the encoding and the reply.',
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
          '× classic script (median per round)',
          'server CPU µs/decision',
          '× transport floor',
          'vs fastest peer of the kind (median per round)',
        ],
        rows,
      ),
      '',
      '"script µs/decision" is the `usec` that `INFO commandstats` gives EVAL, EVALSHA and FCALL (which includes the commands the scripts run), ' +
        'reset with `CONFIG RESETSTAT` before each run and divided by decisions, not calls (sluice decides many keys per call). ' +
        '"server CPU" is the growth of `used_cpu_user + used_cpu_sys` of the redis-server process over the run, per decision: it adds what commandstats leaves out (reading and parsing commands, writing replies, the event loop). ' +
        'The classic script is the token bucket every tutorial shows (TIME, HMGET, HSET, PEXPIRE; one call per decision).',
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
  },
};

export const batchSection: Section<Summary[]> = {
  name: 'batch',
  async run({ quick, settings, bench, chosen, log }) {
    log('Coalescing: maxBatch');
    const sizes = MAX_BATCH_SIZES.map((size) => sluiceRedis(bench.client, policy('gcra'), size));
    return race(bench, chosen(sizes), {
      ...settings,
      rounds: quick ? 1 : 2,
      durationMs: quick ? 700 : 1500,
      log,
    });
  },
  render(rows, results) {
    if (rows.length === 0) return [];
    return [
      '## Coalescing: maxBatch',
      '',
      `GCRA with the decisions of one tick coalesced into calls of at most \`maxBatch\` keys (1 turns coalescing off), ${results.settings.concurrency} in flight; ` +
        `median of ${rows[0]?.runs.length ?? 0} rounds. Every key is still decided atomically and on its own, in the order of the requests.`,
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
  },
};
