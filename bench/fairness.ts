// Latency and fairness under a mix of hot and cold keys: half the decisions go to 10 hot identifiers
// (far past their limit, so mostly denied), half to 10 000 cold ones. A coalescing store must not
// make the cold keys wait behind the hot ones.
import { type Contender, peersOnRedis, SLUICE_POLICIES, sluiceRedis, WINDOW_MS } from './contenders.js';
import { byId, count, ms, table } from './format.js';
import { collectGarbage, median, quantile, runLoad } from './load.js';
import type { Summary } from './race.js';
import { policy } from './redis.js';
import type { Section } from './section.js';
import type { BenchServer } from './server.js';

export const HOT_IDENTIFIERS = 10;

export interface FairnessRecord {
  readonly id: string;
  readonly library: string;
  readonly label: string;
  readonly perSecond: number;
  readonly hotP50Ms: number;
  readonly hotP99Ms: number;
  readonly coldP50Ms: number;
  readonly coldP99Ms: number;
  /** Share of the hot identifiers' decisions that were allowed. */
  readonly hotAllowedShare: number;
}

export interface FairnessOptions {
  readonly rounds: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly concurrency: number;
  /** Cold identifiers, built per call. */
  readonly identifiers: number;
  readonly log: (line: string) => void;
}

async function once(
  bench: BenchServer,
  contender: Contender,
  options: FairnessOptions,
): Promise<Omit<FairnessRecord, 'id' | 'library' | 'label'>> {
  await bench.flush();
  const cold = options.identifiers;
  // Even decisions go to a hot identifier, odd ones walk the cold identifiers.
  const pick = (i: number): number => (i % 2 === 0 ? cold + ((i >> 1) % HOT_IDENTIFIERS) : (i >> 1) % cold);
  const name = (index: number): string => (index < cold ? `user:${index}` : `hot:${index - cold}`);
  const decider = contender.setup();
  const base = { concurrency: options.concurrency, identifiers: cold + HOT_IDENTIFIERS, pick, name };
  await runLoad(decider, { ...base, durationMs: options.warmupMs, minDecisions: 2 * cold });
  collectGarbage();
  let hotAllowed = 0;
  const hot: number[] = [];
  const coldLatencies: number[] = [];
  const result = await runLoad(decider, {
    ...base,
    durationMs: options.durationMs,
    observe: (index, latencyMs, allowed) => {
      if (index >= cold) {
        hot.push(latencyMs);
        if (allowed) hotAllowed++;
      } else {
        coldLatencies.push(latencyMs);
      }
    },
  });
  const hotTotal = hot.length;
  hot.sort((a, b) => a - b);
  coldLatencies.sort((a, b) => a - b);
  return {
    perSecond: result.perSecond,
    hotP50Ms: quantile(hot, 0.5),
    hotP99Ms: quantile(hot, 0.99),
    coldP50Ms: quantile(coldLatencies, 0.5),
    coldP99Ms: quantile(coldLatencies, 0.99),
    hotAllowedShare: hotAllowed / Math.max(1, hotTotal),
  };
}

export async function fairness(
  bench: BenchServer,
  contenders: readonly Contender[],
  options: FairnessOptions,
): Promise<FairnessRecord[]> {
  const runs = new Map<string, Array<Awaited<ReturnType<typeof once>>>>(contenders.map((c) => [c.id, []]));
  for (let round = 0; round < options.rounds; round++) {
    const shift = round % contenders.length;
    for (const contender of [...contenders.slice(shift), ...contenders.slice(0, shift)]) {
      const record = await once(bench, contender, options);
      runs.get(contender.id)?.push(record);
      options.log(
        `  round ${round + 1} ${contender.id.padEnd(34)} ${Math.round(record.perSecond).toString().padStart(7)}/s` +
          `  hot p50 ${record.hotP50Ms.toFixed(2)} p99 ${record.hotP99Ms.toFixed(2)} ms` +
          `  cold p50 ${record.coldP50Ms.toFixed(2)} p99 ${record.coldP99Ms.toFixed(2)} ms`,
      );
    }
  }
  return contenders.map((contender) => {
    const records = runs.get(contender.id) ?? [];
    const pick = (f: (r: (typeof records)[number]) => number) => median(records.map(f));
    return {
      id: contender.id,
      library: contender.library,
      label: contender.label,
      perSecond: pick((r) => r.perSecond),
      hotP50Ms: pick((r) => r.hotP50Ms),
      hotP99Ms: pick((r) => r.hotP99Ms),
      coldP50Ms: pick((r) => r.coldP50Ms),
      coldP99Ms: pick((r) => r.coldP99Ms),
      hotAllowedShare: pick((r) => r.hotAllowedShare),
    };
  });
}

export const fairnessSection: Section<FairnessRecord[]> = {
  name: 'fairness',
  async run({ quick, settings, bench, chosen, log }) {
    log('Hot and cold keys');
    const client = bench.client;
    // @upstash/ratelimit answers denied identifiers from its ephemeral cache by default; sluice's
    // deny cache is opt-in: both ways are shown.
    const cached = ['fixedWindow', 'gcra'].map((label) =>
      sluiceRedis(client, policy(label), undefined, WINDOW_MS, true),
    );
    const contenders = [
      ...SLUICE_POLICIES.map((p) => sluiceRedis(client, p)),
      ...cached,
      ...peersOnRedis(client),
    ];
    return fairness(bench, chosen(contenders), {
      rounds: quick ? 1 : 2,
      durationMs: quick ? 700 : 1500,
      warmupMs: quick ? 200 : 500,
      concurrency: settings.concurrency,
      identifiers: settings.identifiers,
      log,
    });
  },
  render(rows, results) {
    if (rows.length === 0) return [];
    const uniform = results.sections.redis as Summary[] | undefined;
    return [
      '## Hot and cold keys',
      '',
      `Half the decisions go to ${HOT_IDENTIFIERS} hot identifiers (far past their limit, so mostly denied), half to ${count(results.settings.identifiers)} cold ones; ` +
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
  },
};
