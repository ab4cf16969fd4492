// Watches a Redis server with MONITOR on a raw connection: every command in the order the server ran
// it, with the server's time and who sent it (a client's address, or `lua` for a script's own commands).
import { connect, type Socket } from 'node:net';

/** One command as MONITOR reports it. */
export interface Monitored {
  /** The server's time when it ran the command, in ms since the epoch (µs precision). */
  readonly atMs: number;
  /** `127.0.0.1:53012` for a client, `lua` for a command a script ran. */
  readonly source: string;
  /** The command and its arguments, unescaped. */
  readonly args: readonly string[];
}

export interface Monitor {
  readonly commands: readonly Monitored[];
  /** The address of MONITOR's own connection (to leave its commands out). */
  readonly self: string;
  stop(): Promise<void>;
}

const LINE = /^\+(\d+\.\d+) \[\d+ ([^\]]+)\] (.*)$/;

function unescaped(text: string): string {
  return text.replace(/\\(x[0-9a-f]{2}|.)/g, (_, code: string) => {
    if (code.startsWith('x')) return String.fromCharCode(Number.parseInt(code.slice(1), 16));
    return code === 'n' ? '\n' : code === 'r' ? '\r' : code === 't' ? '\t' : code;
  });
}

function parse(line: string): Monitored | undefined {
  const match = LINE.exec(line);
  if (match === null) return undefined;
  const args = [...(match[3] as string).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) =>
    unescaped(m[1] as string),
  );
  return { atMs: Number(match[1]) * 1000, source: match[2] as string, args };
}

/** Starts MONITOR on `port`; resolves once the server has said OK. */
export function startMonitor(port: number): Promise<Monitor> {
  const commands: Monitored[] = [];
  const socket: Socket = connect(port, '127.0.0.1');
  let buffered = '';
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => {
      // Split once per chunk: slicing the rest of a large chunk for each line would copy it each time.
      const lines = (buffered + chunk.toString('latin1')).split('\r\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (line === '+OK') {
          resolve({
            commands,
            self: `${socket.localAddress}:${socket.localPort}`,
            stop: () =>
              new Promise<void>((done) => {
                socket.once('close', () => done());
                socket.destroy();
              }),
          });
          continue;
        }
        const command = parse(line);
        if (command !== undefined) commands.push(command);
      }
    });
    socket.write('MONITOR\r\n');
  });
}

/** Commands clients sent (not those scripts ran), the round trips a run cost. */
export function clientCommands(monitor: Monitor): Monitored[] {
  return monitor.commands.filter((command) => command.source !== 'lua' && command.source !== monitor.self);
}
