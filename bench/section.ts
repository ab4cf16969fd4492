// What one part of the benchmark is: a name, a run that returns JSON, the Markdown it renders, and
// the targets it checks. bench/run.ts runs the built-in sections, then any optional ones it finds.
//
// An optional section is a file bench/<name>.ts (envoy.ts, metrics.ts, clients.ts, ...; see
// OPTIONAL_SECTIONS in run.ts) that exports `section` (or `sections`) of type Section. It gets the
// shared redis-server, the settings and a logger; what `run` returns lands in the results file under
// its name, and `render`/`targets` turn it into BENCHMARKS.md (also from a results file, without a run).
import type { Contender } from './contenders.js';
import type { Machine, Versions } from './machine.js';
import type { BenchServer } from './server.js';

export interface Settings {
  readonly rounds: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly concurrency: number;
  readonly identifiers: number;
  readonly limit: number;
  readonly windowMs: number;
}

/** A goal and how this run fared against it. */
export interface Target {
  readonly target: string;
  readonly measured: string;
  /** null when the figure could not be measured in this run. */
  readonly met: boolean | null;
}

/** Everything one `npm run bench` measured: each section's result under its name. */
export interface Results {
  readonly date: string;
  readonly quick: boolean;
  readonly machine: Machine;
  readonly versions: Versions;
  readonly settings: Settings;
  readonly sections: Readonly<Record<string, unknown>>;
  readonly targets?: Target[];
  /** Sections measured again after the run (`--merge`): when, at what load, on which commit. */
  readonly remeasured?: Readonly<
    Record<string, { readonly date: string; readonly loadAverageAtStart: number; readonly commit: string }>
  >;
}

/** What a section's run is given. */
export interface SectionContext {
  /** `--quick`: one short round of everything; keep the section to a few seconds. */
  readonly quick: boolean;
  readonly settings: Settings;
  /** The benchmark's own redis-server, its admin connection and the client contenders share. */
  readonly bench: BenchServer;
  /** Keeps the contenders `--filter` names (all of them without the flag). */
  readonly chosen: (contenders: Contender[]) => Contender[];
  /** Whether `--filter` was given: a section that races no contenders may skip itself then. */
  readonly filtered: boolean;
  readonly log: (line: string) => void;
  /** The repository's root (the working directory of `npm run bench`). */
  readonly root: string;
}

export interface Section<R = unknown> {
  /** The key in the results file and the name `--only` takes, e.g. `service`. */
  readonly name: string;
  run(context: SectionContext): Promise<R>;
  /** The section's part of BENCHMARKS.md: Markdown lines, starting with a `##` heading. */
  render(result: R, results: Results): string[];
  /** The targets this section checks, for the table at the top of BENCHMARKS.md. */
  targets?(result: R, results: Results): Target[];
  /** Files the section generates beside BENCHMARKS.md (e.g. a plot): path from the root -> contents. */
  files?(result: R, results: Results): Record<string, string>;
}
