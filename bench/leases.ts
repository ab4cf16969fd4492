// Concurrency leases on Redis: what an acquire + release pair costs the server (script µs per pair, beside one
// fixed-window decision's) and how many pairs a second one client gets through, one at a time and many in flight.
import { concurrency, createLimiter, fixedWindow, type Limiter, RedisStore } from '../src/index.js';
import { BENCH_TIMEOUT_MS } from './contenders.js';
import { count, table } from './format.js';
import type { Section } from './section.js';
import { type BenchServer, scriptTotals } from './server.js';

export interface LeaseRow {
  /** Pairs in flight at once (each loop acquires, then releases, then again). */
  readonly inFlight: number;
  readonly pairs: number;
  readonly pairsPerSecond: number;
  /** Script server time (INFO commandstats usec of EVALSHA and FCALL) per acquire + release pair. */
  readonly serverUsecPerPair: number;
  /** The same for one fixed-window decision, run the same way: the yardstick. */
  readonly serverUsecPerDecision: number;
  /** Script calls per pair: below 2 when the store sent several in one call. */
  readonly callsPerPair: number;
}

const IDENTIFIERS = 64;

async function measure(
  bench: BenchServer,
  pairs: number,
  inFlight: number,
  step: (i: number) => Promise<void>,
) {
  await bench.flush();
  await bench.resetStats();
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < pairs) await step(next++);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { seconds, script: scriptTotals(await bench.commandStats()) };
}

async function leaseRow(bench: BenchServer, pairs: number, inFlight: number): Promise<LeaseRow> {
  const store = new RedisStore({ client: bench.client, prefix: 'lease-bench' });
  const common = { store, timeoutMs: BENCH_TIMEOUT_MS, onStoreError: 'deny' } as const;
  const slots: Limiter = createLimiter({
    ...common,
    policy: concurrency({ limit: 1000, leaseMs: 60_000 }),
    name: 'slots',
  });
  const rate: Limiter = createLimiter({
    ...common,
    policy: fixedWindow({ limit: 1e9, windowMs: 3_600_000 }),
    name: 'rate',
  });
  const leases = await measure(bench, pairs, inFlight, async (i) => {
    const identifier = `c${i % IDENTIFIERS}`;
    const decision = await slots.limit(identifier);
    if (decision.lease === undefined) throw new Error(`refused: ${JSON.stringify(decision)}`);
    await slots.release(identifier, decision.lease);
  });
  const decisions = await measure(bench, pairs, inFlight, async (i) => {
    await rate.limit(`c${i % IDENTIFIERS}`);
  });
  return {
    inFlight,
    pairs,
    pairsPerSecond: pairs / leases.seconds,
    serverUsecPerPair: leases.script.usec / pairs,
    serverUsecPerDecision: decisions.script.usec / pairs,
    callsPerPair: leases.script.calls / pairs,
  };
}

export const section: Section<LeaseRow[]> = {
  name: 'leases',
  async run({ quick, settings, bench, filtered, log }) {
    if (filtered) return [];
    log('Leases: acquire + release');
    const pairs = quick ? 2000 : 20_000;
    const rows = [await leaseRow(bench, pairs, 1), await leaseRow(bench, pairs, settings.concurrency)];
    for (const row of rows) log(`  ${JSON.stringify(row)}`);
    return rows;
  },
  render(rows) {
    if (rows.length === 0) return [];
    return [
      '## Concurrency leases',
      '',
      'A `concurrency({ limit: 1000, leaseMs: 60 s })` limiter on 64 identifiers: each loop acquires a lease and releases it, ' +
        'one loop or many at once over one client. "server µs per pair" is the `usec` INFO commandstats gives the script calls ' +
        '(EVALSHA, FCALL), per acquire + release; "per decision" is one fixedWindow `limit()` run the same way, for scale.',
      '',
      table(
        [
          'in flight',
          'pairs',
          'pairs/s',
          'server µs per pair',
          'server µs per decision',
          'script calls per pair',
        ],
        rows.map((r) => [
          String(r.inFlight),
          count(r.pairs),
          count(Math.round(r.pairsPerSecond)),
          r.serverUsecPerPair.toFixed(2),
          r.serverUsecPerDecision.toFixed(2),
          r.callsPerPair.toFixed(2),
        ]),
      ),
      '',
    ];
  },
};
