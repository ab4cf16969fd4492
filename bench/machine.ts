// What the numbers were measured on: the machine, the runtime, and the versions of every package raced.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { join } from 'node:path';

export interface Machine {
  readonly cpu: string;
  readonly cores: number;
  readonly os: string;
  readonly memoryGiB: number;
  readonly node: string;
  readonly redis: string;
  /** 1-minute load average when the run started: other work on the machine adds noise. */
  readonly loadAverageAtStart: number;
  /** The HTTP load generator's version, when wrk is installed. */
  readonly wrk?: string;
}

/** sluice's version and commit, and the version of every package raced. */
export type Versions = Readonly<Record<string, string>>;

/** The packages whose versions the results name. */
const PACKAGES = ['ioredis', 'rate-limiter-flexible', '@upstash/ratelimit'] as const;

function wrkVersion(): string | undefined {
  try {
    // `wrk --version` prints its banner and exits 1.
    execFileSync('wrk', ['--version'], { stdio: 'pipe' });
  } catch (error) {
    const text = String((error as { stdout?: Buffer }).stdout ?? '');
    const match = /^wrk (\S+)/m.exec(text);
    if (match !== null) return `wrk ${match[1]}`;
  }
  return undefined;
}

function osName(): string {
  try {
    const text = readFileSync('/etc/os-release', 'utf8');
    const pretty = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(text)?.[1];
    if (pretty !== undefined) return `${pretty} (${type()} ${release()})`;
  } catch {
    // Not Linux, or no os-release: the kernel name will do.
  }
  return `${type()} ${release()}`;
}

export function machine(redisVersion: string): Machine {
  const list = cpus();
  const wrk = wrkVersion();
  return {
    cpu: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
    os: osName(),
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    redis: redisVersion,
    loadAverageAtStart: Math.round((loadavg()[0] ?? 0) * 100) / 100,
    ...(wrk === undefined ? {} : { wrk }),
  };
}

function packageVersion(root: string, name: string): string {
  const path = name === 'sluice' ? 'package.json' : join('node_modules', name, 'package.json');
  return (JSON.parse(readFileSync(join(root, path), 'utf8')) as { version: string }).version;
}

function commit(root: string): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root })
      .toString()
      .trim();
    return dirty === '' ? head : `${head} (with uncommitted changes)`;
  } catch {
    return 'unknown';
  }
}

export function versions(root: string): Versions {
  return {
    sluice: packageVersion(root, 'sluice'),
    commit: commit(root),
    ...Object.fromEntries(PACKAGES.map((name) => [name, packageVersion(root, name)])),
  };
}
