// `sluice bench` on a real redis-server: figures for every algorithm, its keys removed, SLOWLOG read.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { parseJson, runCli } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

interface BenchReport {
  durationMs: number;
  results: Array<{
    algorithm: string;
    decisions: number;
    errors: number;
    decisionsPerSecond: number;
    latencyMs: { p50: number; p90: number; p99: number; max: number };
    redisUsPerDecision: number | null;
    decisionsPerCall: number | null;
  }>;
  slowlog: {
    thresholdUs: number | null;
    duringRun: number | null;
    alreadyLogged: number | null;
    entries: Array<{ command: string; durationUs: number; when: string }>;
  };
}

describe('sluice bench', () => {
  let server: RedisServer;
  let redis: Redis;

  before(async () => {
    server = await startRedis();
    redis = new Redis({ port: server.port, lazyConnect: true });
    await redis.connect();
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });

  test('measures every algorithm and leaves no key behind', async () => {
    const result = await runCli([
      'bench',
      '--redis',
      server.url,
      '--duration',
      '300ms',
      '--concurrency',
      '10',
      '--keys',
      '50',
      '--json',
    ]);
    assert.ok(result.code === 0 || result.code === 1, result.stderr);
    const report = parseJson<BenchReport>(result);
    assert.deepEqual(
      report.results.map((r) => r.algorithm),
      ['fixedWindow', 'slidingWindow', 'slidingLog', 'tokenBucket', 'gcra'],
    );
    for (const r of report.results) {
      assert.ok(r.decisions > 0, `${r.algorithm}: ${r.decisions} decisions`);
      assert.equal(r.errors, 0);
      const { p50, p90, p99, max } = r.latencyMs;
      assert.ok(p50 > 0 && p50 <= p90 && p90 <= p99 && p99 <= max, JSON.stringify(r.latencyMs));
      // Script time Redis accounted for these decisions, and the coalescing of up to 10 callers.
      assert.ok(r.redisUsPerDecision !== null && r.redisUsPerDecision > 0, `${r.redisUsPerDecision}`);
      assert.ok(
        r.decisionsPerCall !== null && r.decisionsPerCall >= 1 && r.decisionsPerCall <= 10,
        `${r.decisionsPerCall}`,
      );
    }
    assert.equal(report.slowlog.thresholdUs, 10_000);
    assert.equal(typeof report.slowlog.duringRun, 'number');
    assert.equal(await redis.dbsize(), 0);
  });

  test('reports limiter scripts in SLOWLOG with their time, from the run and from before it; exits 1 only with --strict', async () => {
    await redis.config('SET', 'slowlog-log-slower-than', '0');
    try {
      await redis.slowlog('RESET');
      // An application's limiter call on rl:* that the log already holds.
      await redis.eval("return redis.call('GET', KEYS[1])", 1, 'rl:api:{customer-9}');
      const result = await runCli([
        'bench',
        '--redis',
        server.url,
        '--duration',
        '100ms',
        '--concurrency',
        '2',
        '--keys',
        '5',
        '--json',
        '--strict',
      ]);
      assert.equal(result.code, 1, result.stderr);
      const { slowlog } = parseJson<BenchReport>(result);
      assert.equal(slowlog.thresholdUs, 0);
      assert.ok((slowlog.duringRun ?? 0) > 0, `during: ${slowlog.duringRun}`);
      assert.equal(slowlog.alreadyLogged, 1);
      assert.ok(
        slowlog.entries.some(
          (entry) =>
            entry.when === 'already logged' &&
            /^EVAL return redis\.call\('GET', KEYS\[1\]\) 1 rl:api:\{customer-9\}/i.test(entry.command),
        ),
      );
      const during = slowlog.entries.filter((entry) => entry.when === 'during the run');
      assert.ok(
        during.length > 0 &&
          during.every((entry) => entry.durationUs >= 0 && /^EVALSHA /i.test(entry.command)),
      );
      await redis.slowlog('RESET');
      await redis.eval("return redis.call('GET', KEYS[1])", 1, 'rl:api:{customer-9}');
      const text = await runCli([
        'bench',
        '--redis',
        server.url,
        '--duration',
        '100ms',
        '--concurrency',
        '2',
        '--keys',
        '5',
      ]);
      assert.equal(text.code, 0, 'without --strict, a script in SLOWLOG is reported, not a failure');
      assert.match(
        text.stdout,
        /\nSLOWLOG \(calls slower than 0 µs\): \d+ limiter script calls during the run; 1 on rl:\* keys already in the log\.\n/,
      );
      assert.match(
        text.stdout,
        /\n {2}#\d+ [\d,]+ µs, during the run: EVALSHA [0-9a-f]{40} \d+ sluice-bench-/i,
      );
      assert.match(text.stdout, /\n {2}#\d+ [\d,]+ µs, already logged: EVAL return redis/i);
      assert.match(text.stdout, /--strict makes this exit 1\.\n/);
      assert.match(
        text.stdout,
        /\nalgorithm\s+decisions\s+decisions\/s\s+p50 ms\s+p90 ms\s+p99 ms\s+max ms\s+Redis µs\/decision\s+decisions\/call\n/,
      );
    } finally {
      await redis.config('SET', 'slowlog-log-slower-than', '10000');
    }
  });
});
