// Where the time goes: CPU profiles (node --cpu-prof) of the hot paths beside their floors, cut to the
// measured run, and an anatomy of one decision (promises, timers and bytes allocated, and where).
import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { count, notRun, percent, table } from './format.js';
import { MAP_FLOOR, SLUICE_MEMORY_FIXED_WINDOW } from './memory-contenders.js';
import { type ProfileSummary, summarise } from './profile-analysis.js';
import type { Anatomy, ProfileJob, ProfileRun } from './profile-worker.js';
import { REDIS_FLOOR } from './redis-floor.js';
import type { Section } from './section.js';

const execute = promisify(execFile);

/** Where the profiles are kept (not committed): open them in Chrome DevTools or speedscope. */
export const PROFILE_DIR = join('bench', 'results', 'profiles');
const SAMPLING_INTERVAL_US = 100;

const TARGETS = [
  { id: MAP_FLOOR, label: 'memory: the Map floor', redis: false },
  { id: SLUICE_MEMORY_FIXED_WINDOW, label: 'memory: sluice fixedWindow', redis: false },
  { id: REDIS_FLOOR, label: 'Redis: the transport floor', redis: true },
  { id: 'sluice.fixedWindow', label: 'Redis: sluice fixedWindow (coalesced)', redis: true },
] as const;

export interface ProfileRow {
  readonly id: string;
  readonly label: string;
  readonly perSecond: number;
  readonly summary: ProfileSummary;
  readonly anatomy: Anatomy;
}

export interface ProfileResult {
  readonly rows: ProfileRow[];
  readonly durationMs: number;
}

async function child<T>(job: ProfileJob, flags: readonly string[]): Promise<T> {
  const worker = fileURLToPath(new URL('./profile-worker.js', import.meta.url));
  const { stdout } = await execute(process.execPath, [...flags, '--expose-gc', worker, JSON.stringify(job)], {
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout) as T;
}

export const profileSection: Section<ProfileResult> = {
  name: 'profile',
  async run({ quick, settings, bench, filtered, log, root }) {
    const durationMs = quick ? 1500 : 3000;
    if (filtered) return { rows: [], durationMs };
    log('Where the time goes: CPU profiles and the anatomy of a decision');
    const dir = join(root, PROFILE_DIR);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const rows: ProfileRow[] = [];
    for (const target of TARGETS) {
      const job: ProfileJob = {
        kind: 'profile',
        id: target.id,
        ...(target.redis ? { redisPort: bench.server.port } : {}),
        concurrency: settings.concurrency,
        identifiers: settings.identifiers,
        durationMs,
        decisions: quick ? 20_000 : 100_000,
      };
      if (target.redis) await bench.flush();
      const name = `${target.id}.cpuprofile`;
      const run = await child<ProfileRun>(job, [
        '--cpu-prof',
        `--cpu-prof-dir=${dir}`,
        `--cpu-prof-name=${name}`,
        `--cpu-prof-interval=${SAMPLING_INTERVAL_US}`,
      ]);
      const summary = summarise(join(dir, name), run.fromUs, run.toUs);
      if (target.redis) await bench.flush();
      const counted = await child<Anatomy>({ ...job, kind: 'anatomy' }, []);
      // Inlined code charges what it allocates to the outermost function: the sites come from a run
      // without inlining, where each allocation is charged to the function that makes it.
      if (target.redis) await bench.flush();
      const sited = await child<Anatomy>({ ...job, kind: 'anatomy' }, ['--no-turbo-inlining']);
      const anatomy: Anatomy = { ...counted, sites: sited.sites };
      log(
        `  ${target.id.padEnd(28)} ${count(run.perSecond).padStart(9)}/s  ${summary.parts
          .slice(0, 4)
          .map((p) => `${p.name} ${percent(p.share)}`)
          .join(
            ', ',
          )}; ${anatomy.bytes.toFixed(0)} bytes and ${(anatomy.resources.PROMISE ?? 0).toFixed(2)} promises per decision`,
      );
      rows.push({ id: target.id, label: target.label, perSecond: run.perSecond, summary, anatomy });
    }
    await bench.flush();
    // Profiles of other runs (node writes one per process) are not ours to keep.
    for (const file of readdirSync(dir)) {
      if (!TARGETS.some((t) => file === `${t.id}.cpuprofile`)) rmSync(join(dir, file));
    }
    return { rows, durationMs };
  },
  render({ rows, durationMs }) {
    if (rows.length === 0) return notRun('Where the time goes');
    const parts = [...new Set(rows.flatMap((r) => r.summary.parts.map((p) => p.name)))];
    const resourceTypes = [...new Set(rows.flatMap((r) => Object.keys(r.anatomy.resources)))].sort();
    return [
      '## Where the time goes',
      '',
      `CPU profiles (\`node --cpu-prof\`, a sample every ${SAMPLING_INTERVAL_US} µs) of ${durationMs / 1000} s runs with 200 in flight over 10,000 identifiers built per call, each in a process of its own, ` +
        `cut to the measured run (the warm-up left out). Each sample counts for the function it was taken in (self time); parts are told apart by the script's path. ` +
        `The profiles are kept in \`${PROFILE_DIR}/\` (not committed) for Chrome DevTools or speedscope.`,
      '',
      table(
        ['part of the process', ...rows.map((r) => r.label)],
        parts.map((part) => [
          part,
          ...rows.map((r) => {
            const share = r.summary.parts.find((p) => p.name === part)?.share;
            return share === undefined ? '–' : percent(share);
          }),
        ]),
      ),
      '',
      `Decisions/s while profiled: ${rows.map((r) => `${r.label} ${count(r.perSecond)}`).join('; ')}.`,
      '',
      ...rows.flatMap((r) => [
        `### ${r.label}: the functions with the most samples`,
        '',
        table(
          ['function (file:line)', 'share of samples'],
          r.summary.functions.slice(0, 12).map((f) => [`\`${f.name}\``, percent(f.share)]),
        ),
        '',
      ]),
      '### Anatomy of a decision',
      '',
      'Async resources created per decision (counted with `async_hooks`, the benchmark loop included: it awaits each decision), and bytes allocated per decision ' +
        "(V8's sampling heap profiler, every 128 bytes on average, garbage included), with the functions that allocate the most.",
      '',
      table(
        ['per decision', ...rows.map((r) => r.label)],
        [
          ...resourceTypes.map((type) => [
            `${type} created`,
            ...rows.map((r) => (r.anatomy.resources[type] ?? 0).toFixed(2)),
          ]),
          ['bytes allocated', ...rows.map((r) => r.anatomy.bytes.toFixed(0))],
        ],
      ),
      '',
      ...rows.flatMap((r) => [
        `- ${r.label}: ${r.anatomy.sites
          .slice(0, 6)
          .map((s) => `\`${s.site}\` ${s.bytes.toFixed(0)} B`)
          .join(', ')}.`,
      ]),
      '',
    ];
  },
};
