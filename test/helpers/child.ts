// Messages from a forked test process: the next one carrying a field, or a rejection if it exits first.
import type { ChildProcess } from 'node:child_process';

/** The value of `field` in the next message from `child` that carries it; rejects if the child exits first. */
export function nextMessage(child: ChildProcess, field: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: Record<string, unknown>) => {
      if (!(field in message)) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(message[field]);
    };
    const onExit = (code: number | null) => reject(new Error(`process exited (${code}) before "${field}"`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}
