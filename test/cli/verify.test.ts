// `sluice verify` on a real redis-server: exact counts for every algorithm, the race for the naive limiters, clean keys.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { parseJson, runCli, startCli } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { SERVER_FAMILY } from '../helpers/server-family.js';

interface VerifyReport {
  processes: number;
  parallel: number;
  limit: number;
  requests: number;
  exact: boolean;
  results: Array<{
    limiter: string;
    kind: string;
    requests: number;
    allowed: number;
    denied: number;
    errors: number;
    exact: boolean;
    overBy: number;
  }>;
}

const SLUICE = ['fixedWindow', 'slidingWindow', 'slidingLog', 'tokenBucket', 'gcra'];

describe('sluice verify', () => {
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

  test('every algorithm allows exactly the limit; the naive limiters over-admit; its keys are gone', async () => {
    // 150 requests per process at a limit of 100: each process pipelines its reads before any
    // write, so a naive limiter admits at least 150 whatever the timing.
    const result = await runCli([
      'verify',
      '--redis',
      server.url,
      '--processes',
      '3',
      '--parallel',
      '150',
      '--limit',
      '100',
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const report = parseJson<VerifyReport>(result);
    assert.equal(report.requests, 450);
    assert.equal(report.exact, true);
    assert.deepEqual(
      report.results.map((r) => r.limiter),
      [...SLUICE, 'naive GET then INCR', 'MULTI/EXEC without WATCH'],
    );
    for (const r of report.results.filter((r) => r.kind === 'sluice')) {
      assert.deepEqual([r.limiter, r.allowed, r.denied, r.errors, r.exact], [r.limiter, 100, 350, 0, true]);
    }
    for (const r of report.results.filter((r) => r.kind === 'naive')) {
      assert.ok(r.allowed >= 150, `${r.limiter} allowed ${r.allowed}`);
      assert.equal(r.overBy, r.allowed - 100);
      assert.equal(r.errors, 0);
    }
    assert.equal(await redis.dbsize(), 0, 'verify deletes its keys');
    // One line per round on stderr while it runs.
    assert.match(result.stderr, /verify: gcra: 100 of 450 allowed/);
  });

  test('prints the table with the default load', async () => {
    const result = await runCli(['verify', '--redis', server.url]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      // The server named as its INFO does: Redis 7.0.15, Valkey 8.0.1.
      new RegExp(
        `^5 processes x 100 parallel requests = 500 at a limit of 100, on ${SERVER_FAMILY.label} [\\d.]+ at redis://127\\.0\\.0\\.1:\\d+\\n`,
      ),
    );
    for (const name of SLUICE) {
      assert.match(result.stdout, new RegExp(`\\n${name}\\s+500\\s+100\\s+400\\s+0\\s+exact\\n`));
    }
    assert.match(result.stdout, /\nnaive GET then INCR\s+500\s+\d+\s+\d+\s+0\s+/);
    assert.match(result.stdout, /Every sluice algorithm allowed exactly 100\./);
    assert.equal(await redis.dbsize(), 0);
  });

  test('Ctrl-C stops the workers and deletes the keys already written', async () => {
    const running = startCli([
      'verify',
      '--redis',
      server.url,
      '--processes',
      '4',
      '--parallel',
      '2000',
      '--limit',
      '1000',
    ]);
    // After the first round its key exists (with a TTL of about a day) until verify cleans up.
    await running.waitFor(/verify: fixedWindow: \d+ of 8000 allowed/);
    running.child.kill('SIGINT');
    const result = await running.exited;
    assert.equal(result.code, 130, result.stdout + result.stderr);
    assert.match(result.stderr, /interrupted, cleaning up/);
    assert.equal(await redis.dbsize(), 0, 'no key left behind');
  });

  test('refuses a load that cannot exceed the limit', async () => {
    const result = await runCli([
      'verify',
      '--redis',
      server.url,
      '--processes',
      '2',
      '--parallel',
      '50',
      '--limit',
      '100',
    ]);
    assert.equal(result.code, 2);
    assert.equal(
      result.stderr,
      'sluice verify: 2 processes x 50 parallel = 100 requests cannot exceed a limit of 100: raise --processes or --parallel, or lower --limit.\n',
    );
  });
});
