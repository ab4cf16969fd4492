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
}

export interface Versions {
  readonly sluice: string;
  readonly commit: string;
  readonly ioredis: string;
  readonly 'rate-limiter-flexible': string;
  readonly '@upstash/ratelimit': string;
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
  return {
    cpu: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
    os: osName(),
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    redis: redisVersion,
    loadAverageAtStart: Math.round((loadavg()[0] ?? 0) * 100) / 100,
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
    ioredis: packageVersion(root, 'ioredis'),
    'rate-limiter-flexible': packageVersion(root, 'rate-limiter-flexible'),
    '@upstash/ratelimit': packageVersion(root, '@upstash/ratelimit'),
  };
}
