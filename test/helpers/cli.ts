// Runs the built `sluice` CLI as a child process, as an operator would, and collects what it prints.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The CLI entry compiled by `npm test` (tsconfig.json, NodeNext: the same output as the server package's dist). */
export const CLI_PATH = fileURLToPath(new URL('../../packages/server/src/cli/index.js', import.meta.url));

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliOptions {
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
}

export interface RunningCli {
  readonly child: ChildProcess;
  /** Resolves when `pattern` has appeared on stdout or stderr. */
  waitFor(pattern: RegExp): Promise<void>;
  readonly exited: Promise<CliResult>;
  /** What it printed so far. */
  output(): { stdout: string; stderr: string };
}

function environment(extra: Readonly<Record<string, string>> | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  // The tests say where Redis and the config are; the machine's settings must not.
  if (extra?.SLUICE_REDIS_URL === undefined) delete env.SLUICE_REDIS_URL;
  if (extra?.SLUICE_CONFIG === undefined) delete env.SLUICE_CONFIG;
  if (extra?.SLUICE_ADMIN_TOKEN === undefined) delete env.SLUICE_ADMIN_TOKEN;
  return env;
}

/** Starts the CLI; the caller waits on `exited`. */
export function startCli(args: readonly string[], options: CliOptions = {}): RunningCli {
  const child = spawn(process.execPath, [CLI_PATH, ...args], {
    cwd: options.cwd ?? tmpdir(),
    env: environment(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const watchers: Array<() => void> = [];
  const notify = (): void => {
    for (const watcher of watchers.slice()) watcher();
  };
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    notify();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    notify();
  });
  const exited = new Promise<CliResult>((resolve) => {
    child.on('close', (code, signal) => {
      notify();
      resolve({ code, signal, stdout, stderr });
    });
  });
  return {
    child,
    exited,
    output: () => ({ stdout, stderr }),
    waitFor: (pattern) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          if (pattern.test(stdout) || pattern.test(stderr)) {
            watchers.splice(watchers.indexOf(check), 1);
            resolve();
          } else if (child.exitCode !== null || child.signalCode !== null) {
            watchers.splice(watchers.indexOf(check), 1);
            reject(new Error(`the CLI exited before printing ${pattern}:\n${stdout}\n${stderr}`));
          }
        };
        watchers.push(check);
        check();
      }),
  };
}

/** The banner `sluice serve` prints once it listens; the port is the last number of the address. */
const LISTENING = /listening on http:\/\/\S+:(\d+)/;

export interface ServeProcess {
  readonly running: RunningCli;
  /** `http://127.0.0.1:<port>`: a wildcard host (0.0.0.0, ::) listens there too. */
  readonly base: string;
  /** What it printed on stdout up to its banner. */
  readonly banner: string;
}

/** Starts `sluice serve` on a free port with `args` and waits until it listens. */
export async function startServe(
  args: readonly string[] = [],
  options: CliOptions = {},
): Promise<ServeProcess> {
  const running = startCli(['serve', '--port', '0', ...args], options);
  await running.waitFor(LISTENING);
  const banner = running.output().stdout;
  return { running, base: `http://127.0.0.1:${LISTENING.exec(banner)?.[1]}`, banner };
}

/** Runs the CLI to completion. */
export function runCli(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  return startCli(args, options).exited;
}

/** Parses the JSON document a `--json` run printed, with the run's output in the error if it is not one. */
export function parseJson<T = Record<string, unknown>>(result: CliResult): T {
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new Error(
      `expected JSON on stdout (exit ${result.code}):\n${result.stdout}\nstderr:\n${result.stderr}`,
    );
  }
}

/** A temporary directory holding a config file; `remove()` deletes it. */
export function writeConfig(document: unknown): { path: string; dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cli-'));
  const path = join(dir, 'sluice.config.json');
  writeFileSync(path, JSON.stringify(document, null, 2));
  return { path, dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
