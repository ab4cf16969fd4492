// Bad input to the CLI: one clear line each, exit code 2, no stack unless --verbose.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Socket, type Server as TcpServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { type CliResult, runCli } from '../helpers/cli.js';
import { ROOT } from '../helpers/paths.js';
import { freePort, type RedisServer, startRedis } from '../helpers/redis-server.js';

/** Every command that talks to Redis, with the arguments it needs besides --redis. */
const COMMANDS: ReadonlyArray<readonly string[]> = [
  ['audit'],
  ['verify'],
  ['inspect', 'api', 'client-1', '--algorithm', 'gcra', '--limit', '1', '--period', '1s'],
  ['reset', 'api', 'client-1'],
  ['bench'],
];

function listen(server: Server | TcpServer): Promise<number> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : 0);
    });
  });
}

/** One line on stderr, nothing on stdout, exit 2, no stack frames. */
function assertOneLine(result: CliResult, pattern: RegExp): void {
  assert.equal(result.code, 2, `exit code (stderr: ${result.stderr})`);
  assert.equal(result.stdout, '');
  assert.match(result.stderr, pattern);
  assert.equal(result.stderr.split('\n').length, 2, `one line, got:\n${result.stderr}`);
  assert.doesNotMatch(result.stderr, /\n\s+at /);
}

describe('sluice bad input', () => {
  let secured: RedisServer;
  let http: Server;
  let httpPort: number;
  let silent: TcpServer;
  let silentPort: number;
  const sockets = new Set<Socket>();

  before(async () => {
    secured = await startRedis();
    // Set after start: the helper waits for a PONG, which a password would refuse.
    const admin = new Redis({ port: secured.port, lazyConnect: true });
    await admin.connect();
    await admin.config('SET', 'requirepass', 's3cret');
    admin.disconnect();
    http = createHttpServer((_, response) => response.end('hello'));
    httpPort = await listen(http);
    // Accepts connections and never answers.
    silent = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    silentPort = await listen(silent);
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => (silent === undefined ? resolve(undefined) : silent.close(resolve)));
    http?.closeAllConnections();
    await new Promise((resolve) => (http === undefined ? resolve(undefined) : http.close(resolve)));
    await secured?.stop();
  });

  test('a refused connection, for every command', async () => {
    const port = await freePort();
    for (const args of COMMANDS) {
      const result = await runCli([...args, '--redis', `redis://127.0.0.1:${port}`]);
      assertOneLine(
        result,
        new RegExp(
          `^sluice ${args[0]}: Cannot connect to 127\\.0\\.0\\.1:${port}: connection refused \\(is Redis running there\\?\\)\\.\\n$`,
        ),
      );
    }
  });

  test('wrong URLs', async () => {
    assertOneLine(
      await runCli(['audit', '--redis', 'http://127.0.0.1:6379']),
      /^sluice audit: Invalid --redis URL "http:\/\/127\.0\.0\.1:6379": the scheme is "http"; expected host:port, redis:\/\/\[user:password@\]host:port\[\/db\] or rediss:\/\/\.\.\.\n$/,
    );
    assertOneLine(
      await runCli(['verify', '--redis', 'ftp://localhost:6379']),
      /^sluice verify: Invalid --redis URL "ftp:\/\/localhost:6379": the scheme is "ftp"; expected host:port, redis:\/\/\[user:password@\]host:port\[\/db\] or rediss:\/\/\.\.\.\n$/,
    );
    // host:port means redis://host:port: the connection is tried, not the text refused.
    const port = await freePort();
    assertOneLine(
      await runCli(['reset', 'a', 'b', '--redis', `127.0.0.1:${port}`]),
      new RegExp(`^sluice reset: Cannot connect to 127\\.0\\.0\\.1:${port}: connection refused`),
    );
    assertOneLine(
      await runCli(['bench', '--redis', 'not a url']),
      /^sluice bench: Invalid --redis URL "not a url": not a URL;/,
    );
    assertOneLine(
      await runCli(['reset', 'a', 'b', '--redis', 'redis://127.0.0.1:1/zero']),
      /the database "zero" is not a number/,
    );
    // A password in a bad URL is never printed.
    const secret = await runCli(['audit', '--redis', 'redis://user:hunter2@127.0.0.1:6379/x']);
    assertOneLine(secret, /Invalid --redis URL "redis:\/\/user:\*\*\*@127\.0\.0\.1:6379\/x"/);
    assert.doesNotMatch(secret.stderr, /hunter2/);
    assertOneLine(
      await runCli(['audit', '--redis', 'redis://no-such-host.invalid:6379']),
      /^sluice audit: Cannot resolve host "no-such-host\.invalid"\.\n$/,
    );
  });

  test('AUTH failures: a wrong password, and none given', async () => {
    const wrong = await runCli(['audit', '--redis', `redis://:nope@127.0.0.1:${secured.port}`]);
    assertOneLine(
      wrong,
      new RegExp(
        `^sluice audit: Authentication failed at 127\\.0\\.0\\.1:${secured.port}: wrong username or password \\(WRONGPASS`,
      ),
    );
    const none = await runCli(['reset', 'api', 'x', '--redis', secured.url]);
    assertOneLine(
      none,
      new RegExp(
        `^sluice reset: Authentication required at 127\\.0\\.0\\.1:${secured.port}: give the password in the URL`,
      ),
    );
    // And the right one works.
    const right = await runCli(['reset', 'api', 'x', '--redis', `redis://:s3cret@127.0.0.1:${secured.port}`]);
    assert.equal(right.code, 0, right.stderr);
  });

  test('a server that is not Redis: an HTTP server, and one that never answers', async () => {
    for (const args of COMMANDS) {
      const result = await runCli([...args, '--redis', `redis://127.0.0.1:${httpPort}`]);
      assertOneLine(
        result,
        new RegExp(
          `^sluice ${args[0]}: The server at 127\\.0\\.0\\.1:${httpPort} is not a Redis server: its reply does not speak RESP \\(it answered like an HTTP server\\)\\.\\n$`,
        ),
      );
    }
    const quiet = await runCli(['audit', '--redis', `redis://127.0.0.1:${silentPort}`, '--timeout', '300ms']);
    assertOneLine(
      quiet,
      new RegExp(
        `^sluice audit: No answer from 127\\.0\\.0\\.1:${silentPort} within 300 ms: is it a Redis server\\? \\(--timeout sets the wait\\)\\n$`,
      ),
    );
  });

  test('--verbose adds the stack of the underlying error', async () => {
    const result = await runCli(['audit', '--redis', `redis://127.0.0.1:${httpPort}`, '--verbose']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /^sluice audit: The server at .* is not a Redis server/);
    assert.match(result.stderr, /\n\s+at /);
  });

  test('usage errors: unknown command, unknown flag, missing value, bad numbers', async () => {
    assertOneLine(
      await runCli(['audti']),
      /^sluice: Unknown command "audti": did you mean audit\? The commands are audit, verify, inspect, reset, limits, deny, bench, serve \(see `sluice --help`\)\.\n$/,
    );
    assertOneLine(
      await runCli(['upload']),
      /^sluice: Unknown command "upload"; expected one of audit, verify, inspect, reset, limits, deny, bench, serve \(see `sluice --help`\)\.\n$/,
    );
    assertOneLine(
      await runCli(['audit', '--colour']),
      /^sluice audit: Unknown option '--colour' \(see `sluice audit --help`\)\.\n$/,
    );
    assertOneLine(
      await runCli(['audit', '--rat', '5']),
      /^sluice audit: Unknown option '--rat'; did you mean --rate\? \(see `sluice audit --help`\)\.\n$/,
    );
    assertOneLine(
      await runCli(['inspect', 'api', 'k', '--confg=x.json']),
      /^sluice inspect: Unknown option '--confg'; did you mean --config\? \(see `sluice inspect --help`\)\.\n$/,
    );
    assertOneLine(
      await runCli(['bench', '--timeout', '5']),
      /^sluice bench: Expected `--timeout` to be a duration such as 500ms, 30s, 5m, 1h or 2d, got "5": a number needs its unit, 5s for seconds or 5ms for milliseconds/,
    );
    assertOneLine(
      await runCli(['audit', '--redis']),
      /^sluice audit: Option '--redis <value>' argument missing \(see `sluice audit --help`\)\.\n$/,
    );
    assertOneLine(
      await runCli(['audit', '--count', '-5']),
      /^sluice audit: Option '--count' argument is ambiguous \(see `sluice audit --help`\)\.\n$/,
    );
    assertOneLine(
      await runCli(['audit', '--count=-5']),
      /^sluice audit: Expected `--count` to be a whole number from 1 to 1,000,000, got "-5"\.\n$/,
    );
    assertOneLine(
      await runCli(['verify', '--processes', '1000']),
      /^sluice verify: Expected `--processes` to be a whole number from 1 to 64, got "1000"\.\n$/,
    );
    assertOneLine(
      await runCli(['bench', '--duration', 'soon']),
      /^sluice bench: Expected `--duration` to be a duration such as 500ms, 30s, 5m, 1h or 2d, got "soon"\.\n$/,
    );
    const none = await runCli([]);
    assert.equal(none.code, 2);
    assert.match(none.stdout, /^Usage: sluice <command> \[options\]/);
  });

  test('--version prints the version of the package', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    for (const flag of ['--version', '-v']) {
      const result = await runCli([flag]);
      assert.deepEqual([result.code, result.stdout, result.stderr], [0, `${version}\n`, '']);
    }
  });

  test('config files: missing, not JSON, a bad policy', async () => {
    assertOneLine(
      await runCli(['audit', '--config', '/nonexistent/sluice.json']),
      /^sluice audit: Config file \/nonexistent\/sluice\.json does not exist\.\n$/,
    );
    const { writeConfig } = await import('../helpers/cli.js');
    const bad = writeConfig({
      policies: { api: { algorithm: 'tokenBucket', capacity: 0, refillPerSecond: 1 } },
    });
    try {
      assertOneLine(
        await runCli(['audit', '--config', bad.path]),
        /^sluice audit: .*sluice\.config\.json: policies\.api: Expected `tokenBucket\.capacity` to be a positive integer, got 0 \(number\)\. See sluice\/docs\/errors\.md#err_sluice_invalid_option\n$/,
      );
    } finally {
      bad.remove();
    }
  });

  test('--help on every command prints its usage and exits 0', async () => {
    for (const name of ['audit', 'verify', 'inspect', 'reset', 'limits', 'deny', 'bench', 'serve']) {
      const result = await runCli([name, '--help']);
      assert.equal(result.code, 0);
      assert.match(result.stdout, new RegExp(`^Usage: sluice ${name}`));
      assert.match(result.stdout, /--json/);
    }
  });
});
