// Counts the functions of sluice one decision enters, by file: V8's precise coverage (call counts)
// taken after warm decisions, then after N more, divided by N. Needs `npm run build` and redis-server.
//
//   node scripts/decision-path.mjs            a Redis decision (limiter.limit on ioredis) and an Express request
//   node scripts/decision-path.mjs --json     the same, as JSON
//
// Only code under dist/ is counted (ioredis, express and node's own are left out). Every decision is
// awaited before the next, so each is a batch of its own: the figures are those of one decision alone.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { Session } from 'node:inspector/promises';
import { createServer } from 'node:net';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist', 'esm');
const WARM = 2000;
const MEASURED = 100;

async function freePort() {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  return port;
}

async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  for (let i = 0; i < 100; i++) {
    try {
      const socket = (await import('node:net')).connect(port, '127.0.0.1');
      await once(socket, 'connect');
      socket.destroy();
      return { port, stop: () => child.kill() };
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error('redis-server did not start');
}

/** Function entries per file under dist/, and their total, per run of `work` (averaged over `times`). */
async function countCalls(session, work, times) {
  await session.post('Profiler.takePreciseCoverage'); // resets the counters
  for (let i = 0; i < times; i++) await work(i);
  const { result } = await session.post('Profiler.takePreciseCoverage');
  const files = new Map();
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const path = fileURLToPath(script.url);
    if (!path.startsWith(DIST)) continue;
    let calls = 0;
    const names = [];
    for (const fn of script.functions) {
      // The first range of a function counts its entries; a script's top level is not a call.
      const count = fn.ranges[0]?.count ?? 0;
      if (count === 0 || (fn.functionName === '' && fn.ranges[0]?.startOffset === 0)) continue;
      calls += count;
      names.push(`${fn.functionName || '(anonymous)'}×${count / times}`);
    }
    if (calls > 0) files.set(relative(DIST, path), { calls: calls / times, names });
  }
  const total = [...files.values()].reduce((sum, file) => sum + file.calls, 0);
  return { total, files: Object.fromEntries([...files].sort((a, b) => b[1].calls - a[1].calls)) };
}

/** A limiter on a RedisStore over an ioredis client of its own, set up as docs/redis.md says. */
async function redisLimiter(port, name) {
  const { default: Redis } = await import('ioredis');
  const { createLimiter, fixedWindow, RedisStore } = await import(join(DIST, 'index.js'));
  const client = new Redis({ port, enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true });
  await client.connect();
  const limiter = createLimiter({
    store: new RedisStore({ client }),
    policy: fixedWindow({ limit: 1_000_000_000, windowMs: 3_600_000 }),
    name,
    timeoutMs: 60_000,
  });
  return { client, limiter };
}

async function redisDecision(session, port) {
  const { client, limiter } = await redisLimiter(port, 'path');
  const decide = async (i) => {
    const decision = await limiter.limit(`id:${i % 100}`);
    if (!decision.allowed || decision.reason !== undefined) throw new Error('unexpected decision');
  };
  for (let i = 0; i < WARM; i++) await decide(i);
  const counted = await countCalls(session, decide, MEASURED);
  client.disconnect();
  return counted;
}

async function expressRequest(session, port) {
  const { default: express } = await import('express');
  const { rateLimit } = await import(join(DIST, 'http', 'adapters', 'express.js'));
  const { client, limiter } = await redisLimiter(port, 'express');
  const app = express();
  app.use(rateLimit({ limiter }));
  app.get('/', (_req, res) => res.send('ok'));
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const { port: appPort } = server.address();
  const get = () =>
    new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: appPort, path: '/', agent }, (response) => {
          response.resume();
          response.on('end', () =>
            response.statusCode === 200 ? resolve() : reject(new Error(`status ${response.statusCode}`)),
          );
        })
        .on('error', reject);
    });
  for (let i = 0; i < WARM / 4; i++) await get();
  const counted = await countCalls(session, get, MEASURED);
  agent.destroy();
  server.close();
  client.disconnect();
  return counted;
}

function render(name, counted) {
  const lines = [
    `${name}: ${counted.total} function entries per decision in ${Object.keys(counted.files).length} files`,
  ];
  for (const [file, { calls, names }] of Object.entries(counted.files)) {
    lines.push(`  ${String(calls).padStart(6)}  ${file}: ${names.join(', ')}`);
  }
  return lines.join('\n');
}

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
const redis = await startRedis();
try {
  const results = {
    redis: await redisDecision(session, redis.port),
    express: await expressRequest(session, redis.port),
  };
  if (process.argv.includes('--json')) console.log(JSON.stringify(results, null, 2));
  else
    console.log(
      `${render('limiter.limit() on RedisStore (ioredis)', results.redis)}\n\n${render('Express request through sluice/express', results.express)}`,
    );
} finally {
  redis.stop();
  session.disconnect();
}
