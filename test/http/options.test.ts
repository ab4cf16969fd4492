// Middleware options: one validation path, errors that name the option, and the core's request path on edge cases.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { headerKey } from '../../src/http/client-key.js';
import { evaluate } from '../../src/http/handle.js';
import { resolveRateLimitOptions } from '../../src/http/options.js';
import type { RequestView } from '../../src/http/view.js';
import { SluiceError } from '../../src/index.js';
import { memoryLimiter } from '../helpers/http/support.js';

const view = (headers: Record<string, string> = {}, path = '/'): RequestView => ({
  method: 'GET',
  path,
  remoteAddress: '192.0.2.1',
  header: (name) => headers[name],
});

describe('middleware options', () => {
  it('rejects bad options with ERR_SLUICE_INVALID_OPTION naming the option and value', () => {
    const { limiter, close } = memoryLimiter(3);
    try {
      const cases: Array<[unknown, RegExp]> = [
        [{}, /`limiter`/],
        [{ limiter: {} }, /`limiter`/],
        [{ limiter: [] }, /`limiter`/],
        [{ limiter, cost: -1 }, /`cost`.*-1 \(number\)/],
        [{ limiter, cost: 1.5 }, /`cost`/],
        [{ limiter, cost: 0, settle: () => 1 }, /`cost`.*at least 1 with `settle`.*0 \(number\)/],
        [{ limiter, count: 'failures' }, /`count`.*"failures"/],
        [{ limiter, headers: 'draft-9' }, /`headers`/],
        [{ limiter, headers: ['ietf', 'draft-7'] }, /`headers`.*at most one/],
        [{ limiter, limit: 0 }, /`limit`/],
        [{ limiter, limit: [1, 2.5] }, /`limit`/],
        [{ limiter, ban: { after: 1, windowMs: 1000 } }, /`ban.durationMs`/],
        [{ limiter, ban: { after: -1, windowMs: 1000, durationMs: 1000 } }, /`ban.after`/],
        [{ limiter, block: { durationMs: 0 } }, /`block.durationMs`/],
        [{ limiter, block: { duration: 1000 } }, /Unknown option `block.duration`/],
        [{ limiter, partitionKey: { secret: 'short' } }, /`partitionKey`/],
        [{ limiter, warnings: { SLUICE_NOPE: false } }, /`warnings.SLUICE_NOPE`/],
        [{ limiter, onWarning: 'log' }, /`onWarning`/],
        [{ limiter, missingKey: 'allow' }, /`missingKey`/],
        [{ limiter, key: 'ip' }, /`key`/],
        [{ limiter, skip: true }, /`skip`/],
        [{ limiter, problem: { status: 400 } }, /Unknown option `problem.status`/],
        [{ routes: [{ path: 'login', limiter }] }, /`routes\[0\].path`/],
        [{ routes: [{ path: '/login', limiter: 'x' }] }, /`routes\[0\].limiter`/],
        [{ limiter, onDenied: () => {} }, /Unknown option `test.onDenied`/],
      ];
      for (const [options, message] of cases) {
        assert.throws(
          () => resolveRateLimitOptions('test', options as never),
          (error: unknown) =>
            error instanceof SluiceError &&
            error.code === 'ERR_SLUICE_INVALID_OPTION' &&
            message.test(error.message),
          String(message),
        );
      }
    } finally {
      close();
    }
  });

  it('a key over 1 KiB is no usable key: the shared bucket, never an error', async () => {
    const { limiter, close } = memoryLimiter(3);
    try {
      const config = resolveRateLimitOptions('test', { limiter, key: headerKey('x-api-key') });
      const state = {};
      const evaluation = await evaluate(config, {}, view({ 'x-api-key': 'k'.repeat(2000) }), state);
      assert.equal(evaluation.kind, 'allow');
      assert.equal(evaluation.kind === 'allow' ? evaluation.key : '', '(unknown)');
      assert.equal((await limiter.peek('(unknown)')).remaining, 2);
    } finally {
      close();
    }
  });

  it('cost 0 lets the request through uncounted; a limiter function may choose none', async () => {
    const { limiter, close } = memoryLimiter(3);
    try {
      const free = resolveRateLimitOptions('test', { limiter, cost: 0 });
      assert.equal((await evaluate(free, {}, view(), {})).kind, 'skip');
      const chosen = resolveRateLimitOptions<{ plan: string }>('test', {
        limiter: (request) => (request.plan === 'free' ? limiter : undefined),
      });
      assert.equal((await evaluate(chosen, { plan: 'paid' }, view(), {})).kind, 'skip');
      assert.equal((await evaluate(chosen, { plan: 'free' }, view(), {})).kind, 'allow');
      assert.equal((await limiter.peek('192.0.2.1')).remaining, 2);
    } finally {
      close();
    }
  });

  it('partitionKey: true keys one secret per process, so every middleware sends one pk per client', () => {
    const { limiter, close } = memoryLimiter(3);
    try {
      const hash = (partitionKey: boolean | { secret: string }) =>
        Buffer.from(
          resolveRateLimitOptions('test', { limiter, partitionKey }).partitionKey?.('198.51.100.7') ?? [],
        );
      const first = hash(true);
      assert.equal(first.length, 12);
      assert.deepEqual(hash(true), first, 'the same in another middleware of this process');
      assert.notDeepEqual(hash({ secret: 'a secret of at least 16' }), first);
      assert.equal(first.includes(Buffer.from('198.51.100.7')), false);
      assert.equal(resolveRateLimitOptions('test', { limiter }).partitionKey, undefined, 'off by default');
    } finally {
      close();
    }
  });
});
