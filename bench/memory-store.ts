// The memory store against the floor (a Map fixed window) and RateLimiterMemory, each contender in a
// process of its own; identifiers built per call, and (second column) taken from a prebuilt array.
import { byId, count, notRun, paired, pairedText, perSecond, ratio, spread, table } from './format.js';
import { MAP_FLOOR, memoryContenders, RLF_MEMORY, SLUICE_MEMORY_FIXED_WINDOW } from './memory-contenders.js';
import { measureInChild, type RunRecord, race, type Summary } from './race.js';
import type { Section, Target } from './section.js';

export interface MemoryStoreResult {
  readonly perCall: Summary[];
  readonly precomputed: Summary[];
  readonly durationMs: number;
}

/**
 * CPU µs a decision took in its run's process: a ratio of two of them, the slower over the faster,
 * is a ratio of decisions per CPU-second, which other work on a shared machine moves less than
 * decisions/s (each contender runs alone in its process, so the time is its own).
 */
const cpuPerDecision = (run: RunRecord): number => run.cpuUsecPerDecision;

/** Rounds of the per-call race: in-process figures move most with the machine's load. */
const ROUNDS = 5;
const PRECOMPUTED_ROUNDS = 2;

export const memoryStoreSection: Section<MemoryStoreResult> = {
  name: 'memory-store',
  async run({ quick, settings, bench, chosen, log }) {
    const durationMs = quick ? 700 : 1000;
    const base = {
      concurrency: settings.concurrency,
      identifiers: settings.identifiers,
      warmupMs: 300,
      durationMs,
      log,
    };
    const contenders = chosen(memoryContenders());
    log('Memory store, identifiers built per call');
    const perCallOptions = { ...base, rounds: quick ? 1 : ROUNDS, precomputed: false };
    const perCall = await race(bench, contenders, {
      ...perCallOptions,
      measure: (contender, round) => measureInChild(contender, round, perCallOptions),
    });
    log('Memory store, precomputed identifiers');
    const precomputedOptions = { ...base, rounds: quick ? 1 : PRECOMPUTED_ROUNDS, precomputed: true };
    const precomputed = await race(bench, contenders, {
      ...precomputedOptions,
      measure: (contender, round) => measureInChild(contender, round, precomputedOptions),
    });
    return { perCall, precomputed, durationMs };
  },
  targets({ perCall }) {
    const targets: Target[] = [];
    const floor = byId(perCall, MAP_FLOOR);
    const rlf = byId(perCall, RLF_MEMORY);
    const fixed = byId(perCall, SLUICE_MEMORY_FIXED_WINDOW);
    if (fixed !== undefined && floor !== undefined) {
      const speed = paired(fixed, floor, perSecond);
      targets.push({
        target:
          'Memory store, fixedWindow, identifiers built per call: ≥ 0.8× the decisions/s of a Map fixed window (the floor)',
        measured: `${pairedText(speed)}; per CPU-second ${pairedText(paired(floor, fixed, cpuPerDecision))}${rlf === undefined ? '' : `; ${ratio(paired(fixed, rlf, perSecond).median)} RateLimiterMemory (per CPU-second ${ratio(paired(rlf, fixed, cpuPerDecision).median)})`}`,
        met: speed.median >= 0.8,
      });
    }
    if (rlf !== undefined) {
      for (const summary of perCall) {
        if (summary.library !== 'sluice' || summary.id === SLUICE_MEMORY_FIXED_WINDOW) continue;
        const speed = paired(summary, rlf, perSecond);
        const perCpu = paired(rlf, summary, cpuPerDecision);
        targets.push({
          target: `Memory store, ${summary.label}, identifiers built per call: ≥ 2× the decisions/s of RateLimiterMemory`,
          measured: `${pairedText(speed)}; per CPU-second ${pairedText(perCpu)}`,
          met: speed.median >= 2,
        });
      }
    }
    return targets;
  },
  render({ perCall, precomputed, durationMs }, results) {
    if (perCall.length === 0) return notRun('Memory store');
    const floor = byId(perCall, MAP_FLOOR);
    const rlf = byId(perCall, RLF_MEMORY);
    const rlfPrecomputed = byId(precomputed, RLF_MEMORY);
    const rows = perCall.map((s) => {
      const pre = byId(precomputed, s.id);
      return [
        `${s.library} ${s.label}`,
        count(s.perSecond),
        spread(s),
        floor === undefined ? '–' : ratio(paired(s, floor, perSecond).median),
        rlf === undefined ? '–' : ratio(paired(s, rlf, perSecond).median),
        pre === undefined ? '–' : count(pre.perSecond),
        pre === undefined || rlfPrecomputed === undefined
          ? '–'
          : ratio(paired(pre, rlfPrecomputed, perSecond).median),
      ];
    });
    return [
      '## Memory store',
      '',
      `${results.settings.concurrency} decisions in flight over ${count(results.settings.identifiers)} identifiers, in process, each contender in a process of its own ` +
        `(no latency clock: reading it would cost as much as a decision); median of ${perCall[0]?.runs.length ?? 0} interleaved rounds of ${durationMs / 1000} s, ` +
        'each after a warm-up that visits every identifier twice. ' +
        "Identifiers are built per call (`user:<n>`, a template literal at the call site), as a request's address or header is: a new string whose hash V8 has not computed yet. " +
        `The last two columns take them from an array built before the run (${precomputed[0]?.runs.length ?? 0} rounds), whose strings carry cached hashes and flatter any Map-based store. ` +
        'The floor is a fixed window in one `Map` written in the benchmark, answering the same decision fields through a promise, with no validation, expiry, bound or eviction.',
      '',
      table(
        [
          'contender',
          'decisions/s (per call)',
          'range over rounds',
          '× floor',
          '× RateLimiterMemory',
          'decisions/s (precomputed)',
          '× RateLimiterMemory (precomputed)',
        ],
        rows,
      ),
      '',
    ];
  },
};
