// `sluice audit` against a real redis-server: finds exactly the keys that would never reset, fixes them, stays quiet after.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { createLimiter, fixedWindow, RedisStore } from '../../src/index.js';
import { parseJson, runCli, startCli, writeConfig } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { EXACT } from '../helpers/suites.js';
import { clearOfWindowEnd } from '../helpers/window.js';

interface AuditReport {
  complete: boolean;
  scanned: number;
  found: number;
  fixed: number;
  limiters: Array<{
    name: string;
    policy: string | null;
    keys: number;
    noExpiry: number;
    ttlTooLong: number;
    unexpectedType: number;
    fixed: number;
  }>;
  findings: Array<{
    key: string;
    limiter: string;
    problems: string[];
    type: string;
    ttlMs: number;
    fixedTtlMs?: number;
  }>;
}

const HEALTHY = 100_000;

describe('sluice audit', () => {
  let server: RedisServer;
  let redis: Redis;
  const config = writeConfig({
    prefix: 'rl',
    policies: {
      // Windows long enough that the planted keys outlive a slow run on a busy machine.
      api: { algorithm: 'fixedWindow', limit: 100, windowMs: 600_000 },
      login: { algorithm: 'slidingLog', limit: 5, windowMs: 900_000 },
    },
  });

  before(async () => {
    server = await startRedis();
    redis = new Redis({ port: server.port, lazyConnect: true });
    await redis.connect();
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
    config.remove();
  });
  beforeEach(async () => {
    await redis.flushall();
  });

  /** `sluice audit` on this suite's server with its config, and `args`. */
  const audit = (...args: string[]) =>
    runCli(['audit', '--redis', server.url, '--config', config.path, ...args]);

  /** Writes `count` healthy fixed-window counters, 10 000 per pipeline. */
  async function plantHealthy(count: number): Promise<void> {
    const index = Math.floor(Date.now() / 600_000);
    for (let start = 0; start < count; start += 10_000) {
      const pipeline = redis.pipeline();
      for (let i = start; i < Math.min(count, start + 10_000); i++) {
        pipeline.set(`rl:api:{user-${i}}`, `${index}:1`, 'PX', 500_000);
      }
      await pipeline.exec();
    }
  }

  test('finds exactly the TTL-less keys among 100 000 healthy ones, --fix gives them a TTL, and a second run exits 0', async () => {
    // The library's own key below lives until api's 10-minute window ends: a count of 100,006 keys
    // instead of 100,007 was seen when that end fell inside a run.
    await clearOfWindowEnd(600_000, 20_000);
    await plantHealthy(HEALTHY);
    // State written by the library itself is healthy by construction.
    const limiter = createLimiter({
      ...EXACT,
      store: new RedisStore({ client: redis, prefix: 'rl' }),
      policy: fixedWindow({ limit: 100, windowMs: 600_000 }),
      name: 'api',
    });
    await limiter.limit('real-client', { cost: 7 });
    // A classic outage: counters whose process died between INCR and EXPIRE.
    const lost = [
      'rl:api:{lost-1}',
      'rl:api:{lost-2}',
      'rl:api:{lost-3}',
      'rl:login:{lost-4}',
      'rl:legacy-counter',
    ];
    for (const key of lost) {
      if (key.startsWith('rl:login:')) await redis.zadd(key, Date.now(), 'a1');
      else await redis.set(key, '5');
    }
    await redis.zadd('rl:login:{healthy-log}', Date.now(), 'a1');
    await redis.pexpire('rl:login:{healthy-log}', 900_000);
    const total = HEALTHY + 1 + lost.length + 1;
    assert.equal(await redis.dbsize(), total);

    const first = await audit('--json');
    assert.equal(first.code, 1, first.stderr);
    const report = parseJson<AuditReport>(first);
    assert.equal(report.complete, true);
    assert.equal(report.scanned, total);
    assert.equal(report.found, lost.length);
    assert.deepEqual(report.findings.map((f) => f.key).sort(), [...lost].sort());
    for (const finding of report.findings) {
      assert.deepEqual(finding.problems, ['no-expiry']);
      assert.equal(finding.ttlMs, -1);
    }
    const byName = new Map(report.limiters.map((group) => [group.name, group]));
    assert.equal(byName.get('api')?.keys, HEALTHY + 1 + 3);
    assert.equal(byName.get('api')?.noExpiry, 3);
    assert.equal(byName.get('login')?.noExpiry, 1);
    assert.equal(byName.get('login')?.keys, 2);
    assert.equal(byName.get('(other keys)')?.noExpiry, 1);
    assert.equal(report.fixed, 0);
    // Reporting changes nothing.
    for (const key of lost) assert.equal(await redis.pttl(key), -1);

    const fix = await audit('--fix', '--ttl', '1h', '--json');
    assert.equal(fix.code, 1, 'a run that found keys exits 1, also when it fixed them');
    const fixed = parseJson<AuditReport>(fix);
    assert.equal(fixed.found, lost.length);
    assert.equal(fixed.fixed, lost.length);
    // --ttl 1h, but never beyond what the limiter's policy sets (10 minutes for api, 15 for login).
    const longest: Record<string, number> = { api: 600_000, login: 900_000, legacy: 3_600_000 };
    for (const key of lost) {
      const ttl = await redis.pttl(key);
      const limit = longest[key.split(/[:-]/)[1] as string] as number;
      assert.ok(ttl > limit - 60_000 && ttl <= limit, `${key} got ${ttl} ms, expected at most ${limit}`);
      const finding = fixed.findings.find((f) => f.key === key);
      assert.equal(finding?.fixedTtlMs, limit);
    }
    // Healthy keys keep their own TTL.
    const healthyTtl = await redis.pttl('rl:api:{user-42}');
    assert.ok(healthyTtl > 0 && healthyTtl <= 500_000, `healthy key now has ${healthyTtl} ms`);

    const second = await audit();
    assert.equal(second.code, 0, second.stdout + second.stderr);
    assert.match(second.stdout, /Nothing found/);
    assert.match(second.stdout, new RegExp(`Scanned ${total.toLocaleString('en-US')} keys matching rl:\\*`));
  });

  test('reports TTLs far beyond the policy and unexpected types by limiter; --fix cuts the TTL and leaves the types', async () => {
    await plantHealthy(1000);
    await redis.set('rl:api:{forever-ish}', '1:1', 'PX', 86_400_000); // a 10-minute fixed window: never above 10 min
    await redis.hset('rl:api:{a-hash}', 'tokens', '5'); // a hash where a counter belongs, and no TTL either
    await redis.pexpire('rl:api:{a-hash}', 300_000);
    await redis.set('rl:login:{a-string}', '3', 'PX', 600_000); // the sliding log keeps a sorted set
    await redis.rpush('rl:unknown:{a-list}', 'x'); // not in the config: strings or sorted sets only
    await redis.pexpire('rl:unknown:{a-list}', 600_000);
    await redis.set('cache:unrelated', 'x'); // outside the pattern

    const result = await audit('--json');
    assert.equal(result.code, 1, result.stderr);
    const report = parseJson<AuditReport>(result);
    const problems = Object.fromEntries(report.findings.map((f) => [f.key, f.problems]));
    assert.deepEqual(problems, {
      'rl:api:{forever-ish}': ['ttl-too-long'],
      'rl:api:{a-hash}': ['unexpected-type'],
      'rl:login:{a-string}': ['unexpected-type'],
      'rl:unknown:{a-list}': ['unexpected-type'],
    });
    const byName = new Map(report.limiters.map((group) => [group.name, group]));
    assert.equal(byName.get('api')?.policy, 'fixedWindow(limit=100,windowMs=600000)');
    assert.equal(byName.get('api')?.ttlTooLong, 1);
    assert.equal(byName.get('api')?.unexpectedType, 1);
    assert.equal(byName.get('login')?.unexpectedType, 1);
    assert.equal(byName.get('unknown')?.policy, null);
    assert.equal(report.scanned, 1000 + 4, 'cache:unrelated is outside rl:*');

    const text = await audit();
    assert.equal(text.code, 1);
    assert.match(
      text.stdout,
      /rl:api:\{forever-ish\}\s+string\s+TTL 2\d h \d+ min\s+TTL far beyond its policy \(at most 10 min\)/,
    );
    assert.match(text.stdout, /rl:login:\{a-string\}\s+string\s+TTL .*unexpected type \(expected zset\)/);
    // Not a terminal: plain progress lines, no carriage returns.
    assert.match(text.stderr, /audit: [\d,]+ keys scanned \([\d,]+ keys\/s\), \d+ found\n/);
    assert.doesNotMatch(text.stderr, /\r/);

    const fix = await audit('--fix', '--ttl', '1h', '--json');
    assert.equal(fix.code, 1);
    assert.equal(parseJson<AuditReport>(fix).fixed, 1);
    const cut = await redis.pttl('rl:api:{forever-ish}');
    assert.ok(cut > 0 && cut <= 600_000, `the TTL was cut to the policy's longest, got ${cut}`);
    assert.equal(await redis.type('rl:api:{a-hash}'), 'hash', 'types are reported, never changed');

    const again = parseJson<AuditReport>(await audit('--json'));
    assert.deepEqual(again.findings.map((f) => f.key).sort(), [
      'rl:api:{a-hash}',
      'rl:login:{a-string}',
      'rl:unknown:{a-list}',
    ]);

    const matched = parseJson<AuditReport>(await audit('--match', 'rl:login:*', '--json'));
    assert.equal(matched.scanned, 1);
    assert.deepEqual(
      matched.findings.map((f) => f.key),
      ['rl:login:{a-string}'],
    );
  });

  test('stored limits kept until cleared and denials are no findings, and --fix leaves them; a denial without an expiry is one', async () => {
    await clearOfWindowEnd(600_000, 5_000);
    const store = new RedisStore({ client: redis });
    const api = createLimiter({
      store,
      policy: fixedWindow({ limit: 100, windowMs: 600_000 }),
      name: 'api',
      overrides: true,
    });
    await api.setLimit('acme', 1000);
    await api.setLimit('beta', 10, { tag: 'tenant-9', ttlMs: 86_400_000 });
    await api.deny('mallory', { forMs: 86_400_000 });
    await api.limit('acme');
    await redis.set('rl:api:{forgot}%deny', '1'); // a denial written by hand, without an expiry
    const result = await audit('--fix', '--ttl', '1h', '--json');
    const report = parseJson<AuditReport>(result);
    assert.deepEqual(
      report.findings.map((f) => [f.key, f.problems]),
      [['rl:api:{forgot}%deny', ['no-expiry']]],
    );
    assert.equal(
      report.limiters.find((group) => group.name === 'api')?.keys,
      7,
      'entries, indexes and state',
    );
    assert.equal(await redis.pttl('rl:api:{acme}%limit'), -1, 'a limit kept until cleared stays so');
    assert.equal(await redis.pttl('rl:api:%limit'), -1);
    assert.ok((await redis.pttl('rl:api:{mallory}%deny')) > 3_600_000, 'a denial is not cut to the policy');
    assert.equal((await api.limit('acme')).limit, 1000);
  });

  test('Ctrl-C stops a slow scan at once and exits 130', async () => {
    await plantHealthy(20_000);
    // 100 keys per call at 1000 keys/s: about 20 s if left alone.
    const running = startCli([
      'audit',
      '--redis',
      server.url,
      '--config',
      config.path,
      '--count',
      '100',
      '--rate',
      '1000',
    ]);
    await running.waitFor(/keys scanned/);
    running.child.kill('SIGINT');
    const result = await running.exited;
    assert.equal(result.code, 130, result.stderr);
    assert.match(result.stderr, /interrupted, cleaning up/);
    assert.match(result.stdout, /^Interrupted after [\d,]+ keys/);
  });

  test('--fix without --ttl, and a bare number for --ttl, are refused before connecting', async () => {
    const noTtl = await audit('--fix');
    assert.equal(noTtl.code, 2);
    assert.equal(
      noTtl.stderr,
      'sluice audit: `--fix` needs `--ttl`, the expiry to give keys that have none (for example --ttl 1h).\n',
    );
    const bare = await audit('--fix', '--ttl', '3600');
    assert.equal(bare.code, 2);
    assert.equal(
      bare.stderr,
      'sluice audit: Expected `--ttl` to be a duration such as 500ms, 30s, 5m, 1h or 2d, got "3600": a number needs its unit, 3600s for seconds or 3600ms for milliseconds (Redis counts EXPIRE in seconds and PEXPIRE in milliseconds, so a guess would be wrong for someone).\n',
    );
  });

  /** A paying customer's fixed-window counter, 46 minutes into an hour-long window, and a counter that lost its TTL. */
  async function plantCustomers(): Promise<void> {
    await redis.set(
      'rl:api:{paying-customer}',
      String(Math.floor(Date.now() / 3_600_000) * 2 ** 21 + 812),
      'PX',
      2_760_000,
    );
    await redis.set('rl:api:{lost}', '5');
    await redis.zadd('rl:login:{alice}', Date.now(), 'a1');
    await redis.pexpire('rl:login:{alice}', 600_000);
  }

  /** Every key's value and TTL, to prove a refused run wrote nothing. */
  async function snapshot(): Promise<Record<string, [unknown, number]>> {
    const keys = (await redis.keys('*')).sort();
    const entries: Array<[string, [unknown, number]]> = [];
    for (const key of keys) {
      const value =
        (await redis.type(key)) === 'zset'
          ? await redis.zrange(key, '0', '-1', 'WITHSCORES')
          : await redis.get(key);
      entries.push([key, [value, await redis.pttl(key)]]);
    }
    return Object.fromEntries(entries);
  }

  test('without a config: keys without an expiry are reported, TTLs are not judged, and --fix is refused with nothing written', async () => {
    await plantCustomers();
    // No --config, no $SLUICE_CONFIG, and no sluice.config.json in the directory it runs in.
    const result = await runCli(['audit', '--redis', server.url, '--json']);
    assert.equal(result.code, 1, result.stderr);
    const report = parseJson<AuditReport & { ttlsJudged: boolean; config: string | null; note: string }>(
      result,
    );
    assert.deepEqual(
      report.findings.map((f) => [f.key, f.problems]),
      [['rl:api:{lost}', ['no-expiry']]],
      'the 46-minute TTL is not judged against a policy sluice would have to guess',
    );
    assert.deepEqual([report.ttlsJudged, report.config], [false, null]);
    assert.match(report.note, /^TTLs were not judged against policies: no config file was given/);
    for (const group of report.limiters) assert.equal(group.policy, null);

    const text = await runCli(['audit', '--redis', server.url]);
    assert.equal(text.code, 1);
    assert.match(text.stdout, /\napi\s+\(no config\)\s+2\s+1\s+-\s+0\s+0\n/);
    assert.match(
      text.stdout,
      /\nTTLs were not judged against policies: no config file was given \(--config, \$SLUICE_CONFIG\) or found here \(\.\/sluice\.config\.json\)/,
    );
    assert.match(text.stdout, /Run again with --config <file> --fix --ttl <time>/);

    const before = await snapshot();
    const fix = await runCli(['audit', '--redis', server.url, '--fix', '--ttl', '1h']);
    assert.equal(fix.code, 2);
    assert.equal(fix.stdout, '');
    assert.match(
      fix.stderr,
      /^sluice audit: `--fix` needs your policies, and no config file was given .*Nothing was changed\. Pass --config <file> with your application's policies/,
    );
    const after = await snapshot();
    assert.deepEqual(Object.keys(after), Object.keys(before));
    for (const [key, [value, ttl]] of Object.entries(before)) {
      const [valueAfter, ttlAfter] = after[key] as [unknown, number];
      assert.deepEqual(valueAfter, value, `${key} unchanged`);
      // Time passes between the two reads; a TTL cut by a fix would have dropped to seconds.
      assert.ok(
        ttl === -1 ? ttlAfter === -1 : ttlAfter <= ttl && ttlAfter > ttl - 60_000,
        `${key}: ${ttl} -> ${ttlAfter}`,
      );
    }
  });

  test('a config found in the current directory is used as --config is: the same findings, and --fix cuts only by its policies', async () => {
    await plantCustomers();
    // This config's api is an hour-long fixed window: 46 minutes is within it.
    const own = writeConfig({
      policies: { api: { algorithm: 'fixedWindow', limit: 1000, windowMs: 3_600_000 } },
    });
    try {
      const found = await runCli(['audit', '--redis', server.url, '--json'], { cwd: own.dir });
      const given = await runCli(['audit', '--redis', server.url, '--json', '--config', own.path]);
      assert.equal(found.code, 1, found.stderr);
      const report = parseJson<AuditReport & { ttlsJudged: boolean; config: string }>(found);
      assert.deepEqual([report.ttlsJudged, report.config], [true, own.path]);
      assert.deepEqual(report.findings, parseJson<AuditReport>(given).findings);
      assert.deepEqual(
        report.findings.map((f) => [f.key, f.problems]),
        [['rl:api:{lost}', ['no-expiry']]],
      );
      const ttl = await redis.pttl('rl:api:{paying-customer}');
      const fix = await runCli(['audit', '--redis', server.url, '--fix', '--ttl', '1h', '--json'], {
        cwd: own.dir,
      });
      assert.equal(fix.code, 1, fix.stderr);
      assert.equal(parseJson<AuditReport>(fix).fixed, 1);
      const kept = await redis.pttl('rl:api:{paying-customer}');
      assert.ok(kept <= ttl && kept > ttl - 60_000, `the customer's TTL is kept: ${ttl} -> ${kept}`);
      const given1h = await redis.pttl('rl:api:{lost}');
      assert.ok(given1h > 3_000_000 && given1h <= 3_600_000, `the lost counter got --ttl 1h: ${given1h}`);
      // login is not in this config: its sorted set keeps its TTL, unjudged.
      assert.ok((await redis.pttl('rl:login:{alice}')) > 500_000);
    } finally {
      own.remove();
    }
  });

  test('--rate paces by keys returned and does not wait after the last batch; --max-keys stops the walk', async () => {
    await redis.set('rl:api:{only-key}', '1');
    // One key at 1 key per second: a wait after the last batch (or one per SCAN COUNT) would last
    // 1 to 1000 seconds, past the suite's timeout; paced by keys returned, there is nothing to wait for.
    const paced = await audit('--rate', '1', '--json');
    assert.equal(paced.code, 1, paced.stderr);
    assert.equal(parseJson<AuditReport>(paced).scanned, 1);

    await redis.del('rl:api:{only-key}');
    await plantHealthy(500);
    const limited = await audit('--count', '100', '--max-keys', '250', '--json');
    const report = parseJson<AuditReport & { ended: string }>(limited);
    assert.equal(limited.code, 0, limited.stderr + limited.stdout);
    assert.deepEqual([report.scanned, report.complete, report.ended], [250, false, 'max-keys']);
    const text = await audit('--max-keys', '10');
    assert.match(text.stdout, /^Stopped at --max-keys 10 after 10 keys matching rl:\*/);
  });
});
