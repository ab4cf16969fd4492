// `sluice inspect` and `sluice reset` round-trip with the library's own state, for every algorithm.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { maxTtlMs, policyFromSpec } from '../../packages/server/src/cli/config.js';
import { createLimiter, type Limiter, type Policy, RedisStore } from '../../src/index.js';
import { parseJson, runCli, writeConfig } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { EXACT } from '../helpers/suites.js';

interface InspectReport {
  limiter: string;
  policy: string;
  key: string;
  type: string;
  raw: unknown;
  state: Record<string, unknown> | null;
  ttlMs: number | null;
  serverTimeMs: number;
  next: {
    cost: number;
    allowed: boolean;
    limit: number;
    remaining: number;
    remainingAfter: number;
    resetMs: number;
    retryAfterMs: number;
  };
}

// Long periods: nothing refills, slides out or rolls over between the library's write and the CLI's
// read (clock-aligned windows of a week end at a moment a run is most unlikely to straddle).
const WEEK_MS = 604_800_000;

const POLICIES: Record<string, Record<string, unknown>> = {
  fixed: { algorithm: 'fixedWindow', limit: 10, windowMs: WEEK_MS },
  sliding: { algorithm: 'slidingWindow', limit: 10, windowMs: WEEK_MS },
  log: { algorithm: 'slidingLog', limit: 10, windowMs: 3_600_000 },
  bucket: { algorithm: 'tokenBucket', capacity: 10, refillPerSecond: 0.001 },
  cell: { algorithm: 'gcra', limit: 10, periodMs: 3_600_000 },
};

describe('sluice inspect and reset', () => {
  let server: RedisServer;
  let redis: Redis;
  const config = writeConfig({ prefix: 'app', policies: POLICIES });
  const limiters = new Map<string, Limiter>();

  before(async () => {
    server = await startRedis();
    redis = new Redis({ port: server.port, lazyConnect: true });
    await redis.connect();
    const store = new RedisStore({ client: redis, prefix: 'app' });
    for (const [name, spec] of Object.entries(POLICIES)) {
      limiters.set(
        name,
        createLimiter({ ...EXACT, store, policy: policyFromSpec(name, spec) as Policy, name }),
      );
    }
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
    config.remove();
  });

  /** `sluice inspect` as text, on this suite's server with its config. */
  const inspectText = (name: string, identifier: string, ...extra: string[]) =>
    runCli(['inspect', name, identifier, '--redis', server.url, '--config', config.path, ...extra]);

  const inspect = async (name: string, identifier: string, ...extra: string[]): Promise<InspectReport> => {
    const result = await inspectText(name, identifier, '--json', ...extra);
    assert.equal(result.code, 0, result.stderr);
    return parseJson<InspectReport>(result);
  };

  for (const name of Object.keys(POLICIES)) {
    test(`${name}: inspect decodes what the library stored, and reset deletes it`, async () => {
      const limiter = limiters.get(name) as Limiter;
      const identifier = `customer-{${name}}`; // braces are escaped in the key
      await limiter.limit(identifier, { cost: 3 });
      await limiter.limit(identifier, { cost: 1 });
      const report = await inspect(name, identifier);
      const expected = await limiter.peek(identifier);
      assert.equal(report.key, `app:${name}:{customer-%7B${name}%7D}`);
      assert.equal(report.policy, limiter.policy.description);
      const longest = maxTtlMs(limiter.policy);
      assert.ok(
        report.ttlMs !== null && report.ttlMs > 0 && report.ttlMs <= longest,
        `ttl ${report.ttlMs} of ${longest}`,
      );
      assert.deepEqual(
        {
          allowed: report.next.allowed,
          remaining: report.next.remaining,
          remainingAfter: report.next.remainingAfter,
          limit: report.next.limit,
        },
        { allowed: expected.allowed, remaining: 6, remainingAfter: 5, limit: 10 },
      );
      // What the request would leave is what the library's own next decision says.
      const text = await inspectText(name, identifier);
      assert.match(text.stdout, /\nnext {5}cost 1: allowed, 5 remaining after it; limit 10,/);
      assert.equal((await limiter.limit(identifier)).remaining, 5);
      assert.equal(expected.remaining, 6);
      const state = report.state as Record<string, unknown>;
      switch (limiter.policy.algorithm) {
        case 'fixedWindow':
          // One integer: the window's index × 2^21 + the count.
          assert.equal(report.raw, String((state.windowIndex as number) * 2 ** 21 + 4));
          assert.deepEqual([state.count, state.current, state.used], [4, true, 4]);
          assert.equal(state.windowIndex, Math.floor(report.serverTimeMs / WEEK_MS));
          break;
        case 'slidingWindow':
          assert.deepEqual(
            [state.storedPrevious, state.storedCurrent, state.previous, state.current],
            [0, 4, 0, 4],
          );
          assert.equal(state.estimate, 4);
          // On the server's clock, one integer: (index mod 2^11) × 2^42 + previous × 2^21 + current.
          assert.equal(state.windowIndex, Math.floor(report.serverTimeMs / WEEK_MS));
          assert.equal(report.raw, String(((state.windowIndex as number) % 2048) * 2 ** 42 + 4));
          break;
        case 'slidingLog':
          assert.equal(report.type, 'zset');
          assert.deepEqual([state.entries, state.inWindow], [4, 4]);
          assert.equal((state.timesMs as number[]).length, 4);
          assert.ok(Math.abs((state.newestMs as number) - report.serverTimeMs) < 60_000);
          break;
        default:
          // tokenBucket and gcra: one number, the theoretical arrival time.
          assert.equal(report.type, 'string');
          // On the server's clock, stored as minus (2^52 + whole microseconds): see src/stores/redis/stored.ts.
          assert.ok(Number(report.raw) < -(2 ** 52), String(report.raw));
          assert.equal(state.tatMs, (-Number(report.raw) - 2 ** 52) / 1000);
          assert.equal(Math.round(state.used as number), 4);
          assert.equal(Math.round(state.available as number), 6);
      }

      const reset = await runCli([
        'reset',
        name,
        identifier,
        '--redis',
        server.url,
        '--config',
        config.path,
        '--json',
      ]);
      assert.equal(reset.code, 0, reset.stderr);
      assert.deepEqual(parseJson(reset), { limiter: name, identifier, key: report.key, deleted: true });
      assert.equal(await redis.exists(report.key), 0);
      assert.equal((await limiter.peek(identifier)).remaining, 10, 'the library sees a full allowance');
      const after = await inspect(name, identifier);
      assert.equal(after.state, null);
      assert.equal(after.next.remaining, 10);
      const again = await runCli(['reset', name, identifier, '--redis', server.url, '--config', config.path]);
      assert.equal(again.code, 0);
      assert.match(again.stdout, /^Nothing to delete: app:\w+:\{customer-%7B\w+%7D\} holds no state/);
    });
  }

  test('a denied identifier: the text report shows the state and the wait; policy flags replace the config', async () => {
    const limiter = limiters.get('fixed') as Limiter;
    await limiter.limit('heavy', { cost: 10 });
    const result = await inspectText('fixed', 'heavy');
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^limiter {2}fixed: fixedWindow\(limit=10,windowMs=604800000\)\n/);
    assert.match(result.stdout, /\nkey {6}app:fixed:\{heavy\}\n/);
    assert.match(result.stdout, /\nstate {4}10 of 10 used in window \d+ \(/);
    assert.match(result.stdout, /\nnext {5}cost 1: denied, retry after .+ \(\d+ ms\)/);
    // The same key read with the policy given on the command line, and a cost.
    const flags = await runCli([
      'inspect',
      'fixed',
      'heavy',
      '--redis',
      server.url,
      '--prefix',
      'app',
      '--algorithm',
      'fixedWindow',
      '--limit',
      '20',
      '--window',
      '7d',
      '--cost',
      '10',
      '--json',
    ]);
    assert.equal(flags.code, 0, flags.stderr);
    const report = parseJson<InspectReport>(flags);
    assert.equal(report.policy, 'fixedWindow(limit=20,windowMs=604800000)');
    assert.deepEqual(
      [report.next.allowed, report.next.cost, report.next.remaining, report.next.remainingAfter],
      [true, 10, 10, 0],
    );
  });

  test('without a config the policy is unknown: inspect refuses to decode, exit 2, and the key is untouched', async () => {
    const limiter = limiters.get('fixed') as Limiter;
    await limiter.limit('paying-customer', { cost: 3 });
    const key = 'app:fixed:{paying-customer}';
    const [value, ttl] = [await redis.get(key), await redis.pttl(key)];
    // No --config, no $SLUICE_CONFIG, no sluice.config.json where it runs, and no --algorithm.
    const withoutConfig = (...extra: string[]) =>
      runCli(['inspect', 'fixed', 'paying-customer', '--redis', server.url, '--prefix', 'app', ...extra]);
    const result = await withoutConfig();
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.equal(
      result.stderr,
      "sluice inspect: The policy of limiter \"fixed\" is unknown: no config file was given (--config, $SLUICE_CONFIG) or found here (./sluice.config.json). Its state cannot be decoded without it (a fixed window's counter would read as a token bucket's time). Pass --config <file> with your application's policies, or give the policy with --algorithm (see `sluice inspect --help`).\n",
    );
    assert.equal(await redis.get(key), value);
    const after = await redis.pttl(key);
    assert.ok(after <= ttl && after > ttl - 60_000);

    // The wrong policy given by hand: the counter is not read as a token bucket's time.
    const wrong = await withoutConfig(
      '--algorithm',
      'tokenBucket',
      '--capacity',
      '10',
      '--refill-per-second',
      '1',
      '--json',
    );
    assert.equal(wrong.code, 0, wrong.stderr);
    assert.match(
      String(parseJson<InspectReport>(wrong).state?.error),
      /^a TAT of .*, which tokenBucket\(capacity=10,refillPerSecond=1\) never writes: this is not its state \(is the policy right\?\)$/,
    );
  });

  test('a limiter with no known policy, and a policy flag with a bad value, are refused', async () => {
    const unknown = await inspectText('nope', 'x');
    assert.equal(unknown.code, 2);
    assert.match(
      unknown.stderr,
      /^sluice inspect: No policy for limiter "nope" in .*sluice\.config\.json: add it there, or give it with --algorithm/,
    );
    const bad = await runCli([
      'inspect',
      'x',
      'y',
      '--redis',
      server.url,
      '--algorithm',
      'fixedWindow',
      '--limit',
      '0',
      '--window',
      '1m',
    ]);
    assert.equal(bad.code, 2);
    assert.equal(
      bad.stderr,
      'sluice inspect: Expected `--limit` to be a whole number from 1 to 9,007,199,254,740,991, got "0".\n',
    );
    const missing = await runCli([
      'inspect',
      'x',
      'y',
      '--redis',
      server.url,
      '--algorithm',
      'gcra',
      '--limit',
      '5',
    ]);
    assert.equal(missing.code, 2);
    assert.match(
      missing.stderr,
      /^sluice inspect: policy flags: Expected `gcra.periodMs` to be a whole number of milliseconds/,
    );
    const positional = await runCli(['inspect', 'only-one']);
    assert.equal(positional.code, 2);
    assert.equal(
      positional.stderr,
      'sluice inspect: Expected <limiter> <identifier>, got "only-one" (see `sluice inspect --help`).\n',
    );
  });
});
