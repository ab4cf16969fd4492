// Runs a compiled example as its user would (`node example.js`), waits for its address, and stops it.
import { type ChildProcess, spawn } from 'node:child_process';

export interface RunningExample {
  /** `http://127.0.0.1:<port>`, from the "listening on" line it prints. */
  readonly url: string;
  /** What it printed so far. */
  output(): string;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
}

export interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function collect(child: ChildProcess): () => string {
  let text = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  return () => text;
}

/** Starts a server example and resolves once it says where it listens; rejects if it exits first. */
export function startExample(
  command: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): Promise<RunningExample> {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const output = collect(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const look = (): void => {
      const found = /listening on (http:\/\/[\d.]+:\d+)/.exec(output());
      if (found === null) return;
      child.stdout?.off('data', look);
      resolve({
        url: found[1] as string,
        output,
        async stop() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          await exited;
        },
      });
    };
    child.stdout?.on('data', look);
    child.stderr?.on('data', look);
    child.once('exit', (code) =>
      reject(new Error(`${command} ${args.join(' ')} exited (${code}):\n${output()}`)),
    );
  });
}

/** Runs an example that ends by itself. */
export function runExample(
  command: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): Promise<Finished> {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}
