// The LLM scenario at full size, several runs: tokens served against 20 000 per minute per user with
// sluice's reserve and settle, the estimate alone, and a charge refused past the limit, side by side.
// An optional section of run.ts; the scenario itself is test/helpers/llm/scenario.ts (its test asserts the bound).
import { type Figures, Scenario } from '../test/helpers/llm/scenario.js';
import { ESTIMATE, LIMIT, USAGE, VARIANTS, type Variant } from '../test/helpers/llm/shared.js';
import { count, table } from './format.js';
import { median } from './load.js';
import type { Section } from './section.js';

const PROCESSES = 4;
const PER_PROCESS = 75;

export interface LlmResult {
  readonly runs: Figures[];
}

const LABELS: Readonly<Record<Variant, string>> = {
  settle: 'reserve + settle (sluice)',
  estimate: 'estimate only',
  'charge-only': 'charge after, refused past the limit',
};

/** A figure over the runs of a variant: its median, and its range when the runs differ. */
function spreadOf(values: readonly number[]): string {
  if (values.length === 0) return '–';
  const low = Math.min(...values);
  const high = Math.max(...values);
  return low === high ? count(low) : `${count(median([...values]))} (${count(low)}–${count(high)})`;
}

export const section: Section<LlmResult> = {
  name: 'llm',
  async run(context) {
    const rounds = context.quick ? 1 : 5;
    const scenario = await Scenario.start(context.bench.server.port, PROCESSES, 7);
    const runs: Figures[] = [];
    try {
      for (let round = 0; round < rounds; round++) {
        for (const variant of VARIANTS) {
          const figures = await scenario.run(variant, PER_PROCESS);
          context.log(`llm: ${variant}: served ${figures.served}, counted ${figures.counted}`);
          runs.push(figures);
        }
      }
    } finally {
      await scenario.close();
    }
    return { runs };
  },
  render(result) {
    const of = (variant: Variant) => result.runs.filter((run) => run.variant === variant);
    const row = (label: string, figure: (run: Figures) => number | undefined): string[] => [
      label,
      ...VARIANTS.map((variant) =>
        spreadOf(of(variant).flatMap((run) => (figure(run) === undefined ? [] : [figure(run) as number]))),
      ),
    ];
    const rounds = of('settle').length;
    return [
      '## Costs known after the response: an LLM proxy',
      '',
      table(
        ['per run (median, range)', ...VARIANTS.map((variant) => LABELS[variant])],
        [
          row('requests admitted (of 300)', (run) => run.admitted),
          row('tokens served', (run) => run.served),
          row('served beyond the limit', (run) => run.served - run.limit),
          row('bound: excess in flight at the last admission', (run) => run.excessInFlight),
          row('tokens the limiter counted', (run) => run.counted),
          row('tokens cut off by maxDebt / dropped', (run) => run.cutOff + run.dropped),
          row('ms until the next request of the estimate', (run) => run.waitMs),
        ],
      ),
      '',
      `${rounds} run${rounds === 1 ? '' : 's'} of ${PROCESSES * PER_PROCESS} concurrent requests from ${PROCESSES} processes, each through a proxy (sluice's node:http middleware) of a local upstream whose streamed answers end with a usage event of ${USAGE.min} to ${USAGE.max} tokens; one user, ${count(LIMIT)} tokens per minute (a token bucket on Redis), an estimate of ${ESTIMATE} per request. The limiters' clock stands still during a run, so that the minute's refill does not blur what was let through; every decision is still made by the scripts on Redis. "Bound" is the usage beyond their estimate of the requests still in flight when the last one was admitted, read from the order in which Redis ran the calls (MONITOR, replayed through the policy's twin): sluice's docs state that the tokens served exceed the limit by at most that, and its test asserts it on every run. The estimate alone and the charge refused past the limit over-admit too (every approach admits on what it knows before the answers end), but they then count a fraction of what was served, so the user starts over at once; reserve and settle counts every token (up to one allowance of debt) and refuses the user until the refill has paid it.`,
      '',
    ];
  },
};
