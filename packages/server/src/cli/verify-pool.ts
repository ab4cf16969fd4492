// The worker processes of `sluice verify`: forked from the CLI's own entry, driven over IPC in lockstep.
import { type ChildProcess, fork } from 'node:child_process';
import { CliError } from './errors.js';
import { type FromWorker, type ToWorker, VERIFY_WORKER } from './verify-worker.js';

/** Worker processes that each get every message, and whose replies are collected round by round. */
export class Workers {
  readonly #children: ChildProcess[] = [];
  readonly #inbox: FromWorker[][] = [];
  readonly #waiters: Array<() => void> = [];
  #exited: string | undefined;

  constructor(count: number) {
    const entry = process.argv[1];
    if (entry === undefined)
      throw new CliError('Cannot find the sluice entry point to start worker processes.');
    for (let i = 0; i < count; i++) {
      const child = fork(entry, [VERIFY_WORKER], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      this.#inbox.push([]);
      child.on('message', (message: FromWorker) => {
        this.#inbox[i]?.push(message);
        this.#wake();
      });
      child.on('exit', (code, signal) => {
        this.#exited ??= `a worker process exited (${signal ?? `code ${code}`})`;
        this.#wake();
      });
      this.#children.push(child);
    }
  }

  #wake(): void {
    for (const waiter of this.#waiters.splice(0)) waiter();
  }

  send(message: ToWorker): void {
    for (const child of this.#children) child.send(message);
  }

  /** Waits for one message of `type` from every worker; rejects on a failure, an exit or an abort. */
  async collect<T extends FromWorker['type']>(
    type: T,
    signal: AbortSignal,
  ): Promise<Array<Extract<FromWorker, { type: T }>>> {
    for (;;) {
      if (signal.aborted) throw new CliError('interrupted');
      for (const box of this.#inbox) {
        const failed = box.find((message) => message.type === 'failed');
        if (failed !== undefined && failed.type === 'failed') throw new CliError(failed.message);
      }
      if (this.#exited !== undefined) throw new CliError(this.#exited);
      if (this.#inbox.every((box) => box.some((message) => message.type === type))) {
        return this.#inbox.map((box) => {
          const at = box.findIndex((message) => message.type === type);
          return box.splice(at, 1)[0] as Extract<FromWorker, { type: T }>;
        });
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          signal.removeEventListener('abort', wake);
          resolve();
        };
        this.#waiters.push(wake);
        signal.addEventListener('abort', wake, { once: true });
      });
    }
  }

  /** Disconnects every worker and waits for them to exit, so no request lands after the cleanup. */
  async stop(): Promise<void> {
    this.#exited ??= 'stopping';
    await Promise.all(
      this.#children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) {
              resolve();
              return;
            }
            const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            if (child.connected) child.disconnect();
            else child.kill('SIGTERM');
          }),
      ),
    );
  }
}
