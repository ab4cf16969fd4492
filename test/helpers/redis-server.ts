// Starts real redis-server (or valkey-server) processes on free loopback ports for the tests, and tears them down.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVER_FAMILY } from './server-family.js';

export interface RedisServer {
  readonly host: string;
  readonly port: number;
  readonly url: string;
  /** The running process (replaced by restart). */
  readonly process: ChildProcess;
  /** Sends a signal and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the server again on the same port (empty: no persistence). */
  restart(): Promise<void>;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

const checked = new Set<string>();

/** Fails with a clear message when the server binary is missing, rather than a spawn ENOENT. */
export function requireRedisBinary(binary = SERVER_FAMILY.server): void {
  if (checked.has(binary)) return;
  try {
    execFileSync(binary, ['--version'], { stdio: 'pipe' });
    checked.add(binary);
  } catch {
    throw new Error(`${binary} is not installed: ${SERVER_FAMILY.install}`);
  }
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Sends one inline command on a fresh connection and reads the reply until `read` makes something
 * of it; undefined when nothing answers within `timeoutMs` (or the connection fails or closes).
 */
function probe<T>(
  port: number,
  command: string,
  read: (reply: string) => T | undefined,
  timeoutMs: number,
): Promise<T | undefined> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    const settle = (value: T | undefined): void => {
      socket.destroy();
      resolve(value);
    };
    socket.setTimeout(timeoutMs);
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      const value = read(reply);
      if (value !== undefined) settle(value);
    });
    socket.on('error', () => settle(undefined));
    socket.on('timeout', () => settle(undefined));
    socket.on('close', () => settle(undefined));
  });
}

/** Resolves once the server answers PING with PONG, or rejects after `timeoutMs`. */
export async function waitForPing(port: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await probe(
      port,
      'PING',
      (reply) => (reply.includes('\r\n') ? reply.startsWith('+PONG') : undefined),
      500,
    );
    if (ok === true) return;
    if (Date.now() > deadline)
      throw new Error(`The server on port ${port} did not answer PING within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The `process_id` of the server that answers on a port (`INFO server`); 'unknown' when it refuses
 * to say (an error reply), undefined when nothing answers.
 */
function answeringPid(port: number): Promise<number | 'unknown' | undefined> {
  return probe<number | 'unknown'>(
    port,
    'INFO server',
    (reply) => {
      if (reply.startsWith('-')) return 'unknown';
      const match = /process_id:(\d+)/.exec(reply);
      return match === null ? undefined : Number(match[1]);
    },
    2000,
  );
}

/** Another process's server answered on the port this one was to listen on. */
class PortTaken extends Error {}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export interface StartOptions {
  /** Extra arguments for the server, e.g. ['--cluster-enabled', 'yes']. */
  readonly args?: readonly string[];
  /** A fixed port; a free one by default. */
  readonly port?: number;
  /** The binary, e.g. the sentinel's; the family's server (SLUICE_TEST_SERVER) by default. */
  readonly binary?: string;
  /** A configuration file, passed first (redis-sentinel needs one it can rewrite). */
  readonly configFile?: string;
  /**
   * A scheduling priority (nice value) for the server, e.g. -10: a suite that asserts what a healthy server's timing
   * gives (no store timeout in a burst) keeps its server from being starved of CPU by the suites and processes beside it
   * on a loaded machine, as a Redis on its own host would be. Ignored where the process may not raise it.
   */
  readonly priority?: number;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Starts a server of the test run's family (redis-server, or valkey-server with
 * SLUICE_TEST_SERVER=valkey) on 127.0.0.1 with no persistence, in its own temporary directory.
 */
export async function startRedis(options: StartOptions = {}): Promise<RedisServer> {
  const binary = options.binary ?? SERVER_FAMILY.server;
  requireRedisBinary(binary);
  const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
  let port = options.port ?? (await freePort());
  const args = () => [
    ...(options.configFile === undefined ? [] : [options.configFile]),
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--loglevel',
    'warning',
    ...(options.args ?? []),
  ];
  let child: ChildProcess;
  const launch = async (): Promise<void> => {
    const started = spawn(binary, args(), { stdio: ['ignore', 'ignore', 'pipe'] });
    child = started;
    running.add(started);
    if (options.priority !== undefined && started.pid !== undefined) {
      try {
        setPriority(started.pid, options.priority);
      } catch {
        // Not permitted here (not root, no CAP_SYS_NICE): the server runs at the default priority.
      }
    }
    // Kept for the error below, and read so that the pipe never fills.
    let stderr = '';
    started.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString();
    });
    const exit = new Promise<void>((resolve) => started.once('exit', () => resolve()));
    void exit.then(() => running.delete(started));
    // A server that cannot bind (its port, or a cluster node's bus port 10000 above it, taken
    // meanwhile) exits at once: known then, not after waitForPing's timeout.
    const ping = waitForPing(port);
    ping.catch(() => {}); // after an exit, its timeout is nobody's business
    const answered = await Promise.race([ping.then(() => true), exit.then(() => false)]);
    if (!answered) {
      throw new PortTaken(
        `${binary} on port ${port} exited before answering: ${stderr.trim() || '(no output)'}`,
      );
    }
    // "Free a moment ago": a suite running beside this one may have taken the port meanwhile, and
    // its server would answer PING for ours (which could not bind). Only ours will do.
    const pid = await answeringPid(port);
    if (pid !== started.pid && pid !== 'unknown') {
      started.kill('SIGKILL');
      await exited(started);
      throw new PortTaken(
        `port ${port} is served by process ${pid}, not by the server just started (${started.pid})`,
      );
    }
  };
  for (let attempt = 1; ; attempt++) {
    try {
      await launch();
      break;
    } catch (error) {
      if (!(error instanceof PortTaken) || options.port !== undefined || attempt === 5) throw error;
      port = await freePort();
    }
  }
  const server: RedisServer = {
    host: '127.0.0.1',
    port,
    url: `redis://127.0.0.1:${port}`,
    get process() {
      return child;
    },
    async kill(signal = 'SIGKILL') {
      child.kill(signal);
      await exited(child);
    },
    async restart() {
      child.kill('SIGKILL');
      await exited(child);
      await launch();
    },
    async stop() {
      child.kill('SIGKILL');
      await exited(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}
