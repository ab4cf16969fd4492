// Reads a V8 CPU profile (node --cpu-prof) and says where the time went: the share of samples per
// part of the process (sluice, the client library, the benchmark's loop, garbage collection, idle...)
// and per function, counting each sample for the function it was taken in (self time).
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export interface Share {
  readonly name: string;
  /** Share of the samples in the window, 0..1. */
  readonly share: number;
}

export interface ProfileSummary {
  readonly samples: number;
  /** Share per part of the process, largest first. */
  readonly parts: Share[];
  /** The functions with the most samples, largest first, as `name (file:line)`. */
  readonly functions: Share[];
  /** sluice's own functions, largest first. */
  readonly sluiceFunctions: Share[];
}

/** The part of the process a frame belongs to, by its script's URL. */
export function partOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') {
    if (functionName === '(garbage collector)') return 'garbage collection';
    if (functionName === '(idle)') return 'idle (waiting for I/O)';
    if (functionName === '(program)') return 'V8 and native code outside JavaScript';
    return 'V8 built-ins (Map, Promise, strings...)';
  }
  if (url.includes('/build/src/') || url.includes('/dist/')) return 'sluice';
  if (url.includes('/build/bench/')) return "the benchmark's loop";
  const module = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (module !== null) {
    const name = module[1] as string;
    // ioredis parses replies with its own packages.
    return name.startsWith('@ioredis/') || name === 'redis-parser' || name === 'standard-as-callback'
      ? 'ioredis'
      : name;
  }
  if (url.startsWith('node:')) return 'Node.js (streams, sockets, timers)';
  return 'other';
}

function label(frame: CallFrame): string {
  const file = frame.url.replace(/^.*\/(build|node_modules)\//, '').replace(/^file:\/\//, '');
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  return file === '' ? name : `${name} (${file}:${frame.lineNumber + 1})`;
}

function shares(counts: Map<string, number>, total: number): Share[] {
  return [...counts].map(([name, n]) => ({ name, share: n / total })).sort((a, b) => b.share - a.share);
}

/**
 * Summarises the samples taken between `fromUs` and `toUs` (the profile's clock, in µs: the same
 * monotonic clock as process.hrtime), or all of them.
 */
export function summarise(path: string, fromUs = -Infinity, toUs = Infinity): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parts = new Map<string, number>();
  const functions = new Map<string, number>();
  const sluice = new Map<string, number>();
  let time = profile.startTime;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    time += profile.timeDeltas[i] ?? 0;
    if (time < fromUs || time > toUs) continue;
    const node = byId.get(profile.samples[i] as number);
    if (node === undefined) continue;
    total++;
    const part = partOf(node.callFrame);
    const name = label(node.callFrame);
    parts.set(part, (parts.get(part) ?? 0) + 1);
    functions.set(name, (functions.get(name) ?? 0) + 1);
    if (part === 'sluice') sluice.set(name, (sluice.get(name) ?? 0) + 1);
  }
  return {
    samples: total,
    parts: shares(parts, total),
    functions: shares(functions, total).slice(0, 20),
    sluiceFunctions: shares(sluice, total).slice(0, 15),
  };
}
