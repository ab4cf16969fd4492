// The CLI's pure helpers: scan progress, key parsing, windows for verify, durations, decoding, config TTLs.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseDuration } from '../../packages/server/src/cli/args.js';
import { fixFor, judge, limiterOf } from '../../packages/server/src/cli/audit-judge.js';
import { Pacer, scanFraction } from '../../packages/server/src/cli/audit-scan.js';
import { maxTtlMs, stateType } from '../../packages/server/src/cli/config.js';
import { decodeState } from '../../packages/server/src/cli/decode.js';
import { progressBar, table } from '../../packages/server/src/cli/output.js';
import { parseRedisUrl } from '../../packages/server/src/cli/redis.js';
import { closest, editDistance } from '../../packages/server/src/cli/suggest.js';
import { chooseWindowMs } from '../../packages/server/src/cli/verify.js';
import { fixedWindow, gcra, slidingLog, slidingWindow, tokenBucket } from '../../src/index.js';
import { MAX_PAUSE_MS, MAX_WAIT_MS } from '../../src/operations.js';

describe('CLI helpers', () => {
  test('scanFraction follows Redis reverse-binary cursors: a table of 8 buckets is walked in eighths', () => {
    assert.equal(scanFraction('0'), 0);
    // SCAN over 8 buckets returns these cursors in turn, then 0.
    const cursors = ['4', '2', '6', '1', '5', '3', '7'];
    assert.deepEqual(
      cursors.map(scanFraction),
      [1, 2, 3, 4, 5, 6, 7].map((n) => n / 8),
    );
  });

  test('limiterOf reads <prefix>:<name>:{...} and nothing else', () => {
    assert.equal(limiterOf('rl:api:{client-1}', 'rl'), 'api');
    assert.equal(limiterOf('rl:a:b:{x}', 'rl'), 'a:b');
    assert.equal(limiterOf('rl:api:{tenant-9}:user-1', 'rl'), 'api');
    assert.equal(limiterOf('rl:legacy-counter', 'rl'), undefined);
    assert.equal(limiterOf('rl::{x}', 'rl'), undefined);
    assert.equal(limiterOf('cache:api:{x}', 'rl'), undefined);
    assert.equal(limiterOf('rlx:api:{x}', 'rl'), undefined);
  });

  test('chooseWindowMs keeps a verify run away from the end of a clock-aligned window', () => {
    const day = 86_400_000;
    assert.equal(chooseWindowMs(100 * day + day / 2), day);
    // Five minutes before a day boundary: a 25-hour window, in which that moment is far from the end.
    const late = 100 * day + day - 300_000;
    const windowMs = chooseWindowMs(late);
    assert.equal(windowMs, 25 * 3_600_000);
    assert.ok(windowMs - (late % windowMs) > 600_000);
  });

  test('parseDuration wants a unit', () => {
    assert.deepEqual(
      ['500ms', '1.5s', '5m', '1h', '2d'].map((text) => parseDuration('ttl', text)),
      [500, 1500, 300_000, 3_600_000, 172_800_000],
    );
    for (const text of ['3600', '1x', '0s', '-1s', ''])
      assert.throws(() => parseDuration('ttl', text), /Expected `--ttl` to be a duration/);
  });

  test('maxTtlMs and stateType match what each script sets', () => {
    assert.equal(maxTtlMs(fixedWindow({ limit: 5, windowMs: 60_000 })), 60_000);
    assert.equal(maxTtlMs(slidingWindow({ limit: 5, windowMs: 60_000 })), 120_000);
    assert.equal(maxTtlMs(slidingLog({ limit: 5, windowMs: 60_000 })), 60_000);
    // A bucket or GCRA key also carries slots scheduled by wait() (up to an hour) and an upstream's
    // pause (up to an hour), and on the server's clock expires at the next whole second after its TAT.
    const scheduled = MAX_WAIT_MS + MAX_PAUSE_MS + 1000;
    assert.equal(scheduled, 7_201_000);
    assert.equal(maxTtlMs(tokenBucket({ capacity: 10, refillPerSecond: 2 })), 5000 + scheduled);
    assert.equal(maxTtlMs(gcra({ limit: 10, periodMs: 60_000, burst: 2 })), 12_000 + scheduled);
    assert.equal(stateType(slidingLog({ limit: 5, windowMs: 60_000 })), 'zset');
    assert.equal(stateType(gcra({ limit: 5, periodMs: 60_000 })), 'string');
  });

  test('decodeState says what is wrong with state it cannot read', () => {
    const fixed = fixedWindow({ limit: 5, windowMs: 60_000 });
    assert.equal(decodeState(fixed, { type: 'none' }, 0), null);
    assert.deepEqual(decodeState(fixed, { type: 'hash' }, 0), {
      error: 'expected a string for fixedWindow, found a hash',
    });
    assert.deepEqual(decodeState(fixed, { type: 'string', value: '7:x' }, 0), {
      error: 'expected an integer (index × 2^21 + count) or "<window index>:<count>", found "7:x"',
    });
    assert.deepEqual(decodeState(gcra({ limit: 5, periodMs: 1000 }), { type: 'string', value: 'abc' }, 0), {
      error: 'expected a number (the TAT: minus (2^52 + whole µs), minus whole µs, or ms), found "abc"',
    });
    // Both forms of a fixed window: window 3 of 60 s holding 2 units, read at 200 000 ms (window 3).
    for (const value of [String(3 * 2 ** 21 + 2), '3:2']) {
      const view = decodeState(fixed, { type: 'string', value }, 200_000);
      assert.deepEqual(view && 'count' in view ? [view.windowIndex, view.count, view.used] : view, [3, 2, 2]);
    }
    // Both forms of a TAT: minus whole microseconds, or the ms themselves.
    for (const value of ['-1500250', '1500.25']) {
      const view = decodeState(gcra({ limit: 5, periodMs: 1000 }), { type: 'string', value }, 1000);
      assert.equal(view && 'tatMs' in view ? view.tatMs : view, 1500.25);
    }
    // A sliding window stored in the previous window: its current count is now the previous one.
    const sliding = decodeState(
      slidingWindow({ limit: 10, windowMs: 1000 }),
      { type: 'string', value: '4:2:6' },
      5250,
    );
    assert.deepEqual(
      sliding && 'estimate' in sliding
        ? [sliding.previous, sliding.current, sliding.weight, sliding.estimate]
        : sliding,
      [6, 0, 0.75, 4.5],
    );
  });

  test('table right-aligns numeric columns; progressBar fills by fraction', () => {
    assert.equal(
      table([
        ['name', 'keys'],
        ['api', '100,000'],
        ['login', '7'],
      ]),
      ['name      keys', 'api    100,000', 'login        7'].join('\n'),
    );
    assert.equal(progressBar(0.5, 10), '[#####-----]  50%');
    assert.equal(progressBar(2, 4), '[####] 100%');
  });

  test('Pacer gives each batch keys / rate seconds, earns no credit from a slow call, and waits nothing for an empty batch after its time', () => {
    let now = 0;
    const pacer = new Pacer(100, () => now);
    assert.equal(pacer.waitAfter(50), 500, '50 keys at 100/s');
    now = 500;
    assert.equal(pacer.waitAfter(10), 100);
    // The next SCAN took 2 s: no burst afterwards, the next batch gets its own time from now.
    now = 2600;
    assert.equal(pacer.waitAfter(100), 1000);
    now = 3600;
    assert.equal(pacer.waitAfter(0), 0, 'an empty batch costs nothing');
    // A batch returned before the previous one's time ran out waits for both.
    now = 3600;
    pacer.waitAfter(100);
    now = 3700;
    assert.equal(pacer.waitAfter(0), 900);
  });

  test('judge and fixFor: a TTL is judged and cut only by a known policy; a key without expiry gets --ttl, capped by its policy', () => {
    const hour = fixedWindow({ limit: 5, windowMs: 3_600_000 });
    // A 46-minute TTL: unjudged without a policy, within an hour-long policy, far beyond a 10-second one.
    assert.equal(judge('rl:api:{c}', 'api', undefined, 'string', 2_760_000, 'h:1'), undefined);
    assert.equal(judge('rl:api:{c}', 'api', hour, 'string', 2_760_000, 'h:1'), undefined);
    const tooLong = judge(
      'rl:api:{c}',
      'api',
      fixedWindow({ limit: 5, windowMs: 10_000 }),
      'string',
      2_760_000,
      'h:1',
    );
    assert.deepEqual(tooLong?.problems, ['ttl-too-long']);
    assert.deepEqual(fixFor(tooLong as NonNullable<typeof tooLong>, 3_600_000), ['rl:api:{c}', 10_000, 'LT']);
    const lost = judge('rl:x:{c}', 'x', undefined, 'string', -1, 'h:1');
    assert.deepEqual(fixFor(lost as NonNullable<typeof lost>, 3_600_000), ['rl:x:{c}', 3_600_000, 'NX']);
    const lostKnown = judge(
      'rl:api:{c}',
      'api',
      fixedWindow({ limit: 5, windowMs: 60_000 }),
      'string',
      -1,
      'h:1',
    );
    assert.deepEqual(fixFor(lostKnown as NonNullable<typeof lostKnown>, 3_600_000), [
      'rl:api:{c}',
      60_000,
      'NX',
    ]);
    assert.equal(lostKnown?.primary, 'h:1');
  });

  test('closest suggests a name one edit in four letters away, and nothing for a stranger word', () => {
    assert.equal(editDistance('audti', 'audit'), 1);
    assert.equal(closest('audti', ['audit', 'verify']), 'audit');
    assert.equal(closest('rat', ['rate', 'redis']), 'rate');
    assert.equal(closest('max-key', ['max-keys', 'match']), 'max-keys');
    assert.equal(closest('colour', ['config', 'count']), undefined);
    assert.equal(closest('upload', ['audit', 'reset']), undefined);
  });

  test('parseRedisUrl takes host:port, a bare host and [v6]:port as redis:// URLs', () => {
    const cases: Array<[string, string, number, string]> = [
      ['10.0.0.5:6380', '10.0.0.5', 6380, 'redis://10.0.0.5:6380'],
      ['cache.internal', 'cache.internal', 6379, 'redis://cache.internal'],
      ['[::1]:7000', '::1', 7000, 'redis://[::1]:7000'],
      ['redis://:pw@127.0.0.1:6379/2', '127.0.0.1', 6379, 'redis://:***@127.0.0.1:6379/2'],
    ];
    for (const [text, host, port, label] of cases) {
      const target = parseRedisUrl(text);
      assert.deepEqual([target.host, target.port, target.label], [host, port, label], text);
    }
    assert.equal(parseRedisUrl('redis://:pw@127.0.0.1:6379/2').options.db, 2);
    assert.throws(
      () => parseRedisUrl('localhost:http'),
      /Invalid --redis URL "localhost:http": the scheme is "localhost"/,
    );
  });

  test('decodeState refuses state its policy never writes: a window yet to come, a TAT ahead of the tolerance or outlived by its key', () => {
    const hour = 3_600_000;
    const now = 500 * hour + 1000;
    const fixed = fixedWindow({ limit: 5, windowMs: hour });
    assert.match(
      JSON.stringify(decodeState(fixed, { type: 'string', value: `${502 * 2 ** 21 + 1}` }, now)),
      /a count for window 502, starting .* never writes: this is not its state/,
    );
    const bucket = tokenBucket({ capacity: 10, refillPerSecond: 1 });
    // An hour-long fixed window's counter (index x 2^21 + count) read as a token bucket: a time in the past...
    assert.match(
      JSON.stringify(decodeState(bucket, { type: 'string', value: `${500 * 2 ** 21 + 7}` }, now, 2_760_000)),
      /a TAT of .*, in the past on a key that still expires in 2760000 ms, which tokenBucket\(capacity=10,refillPerSecond=1\) never writes/,
    );
    // ...and far ahead of what a 10-token bucket ever sets, with the longest wait and pause added.
    assert.match(
      JSON.stringify(decodeState(bucket, { type: 'string', value: String(now + 3 * hour) }, now, 3 * hour)),
      /a TAT of .*, 10800000 ms ahead, which tokenBucket/,
    );
    // A minute ahead is slots wait() scheduled: decoded, with what is owed shown as negative.
    const scheduled = decodeState(bucket, { type: 'string', value: String(now + 60_000) }, now, 60_000);
    assert.equal(scheduled !== null && 'tatMs' in scheduled ? scheduled.available : scheduled, -50);
    // A TAT the bucket could have written is decoded.
    const view = decodeState(bucket, { type: 'string', value: String(now + 4000) }, now, 4000);
    assert.equal(view !== null && 'tatMs' in view ? view.used : view, 4);
  });
});
