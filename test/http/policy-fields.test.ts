// RateLimit-Policy states each policy's real rate (q units per w seconds), for every policy, with and without a per-request limit.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { evaluate } from '../../src/http/handle.js';
import { resolveRateLimitOptions } from '../../src/http/options.js';
import type { RequestView } from '../../src/http/view.js';
import {
  createLimiter,
  fixedWindow,
  gcra,
  MemoryStore,
  type Policy,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { policyItem } from '../helpers/http/support.js';

const view: RequestView = { method: 'GET', path: '/', remoteAddress: '192.0.2.1', header: () => undefined };

/** The q and w a first request is told, through the middleware's request path. */
async function fieldsOf(policy: Policy, limit?: number): Promise<{ q: number; w: number }> {
  const store = new MemoryStore();
  try {
    const limiter = createLimiter({ store, policy, name: 'api', clock: () => 1_000_000 });
    const config = resolveRateLimitOptions('test', limit === undefined ? { limiter } : { limiter, limit });
    const evaluation = await evaluate(config, {}, view, {});
    assert.equal(evaluation.kind, 'allow');
    return policyItem(evaluation.kind === 'allow' ? evaluation.headers : {}, 'api');
  } finally {
    store.close();
  }
}

describe('RateLimit-Policy q and w', () => {
  const cases: Array<[string, Policy, number | undefined, { q: number; w: number }]> = [
    [
      'fixedWindow 100 per minute',
      fixedWindow({ limit: 100, windowMs: 60_000 }),
      undefined,
      { q: 100, w: 60 },
    ],
    [
      'slidingWindow 100 per minute',
      slidingWindow({ limit: 100, windowMs: 60_000 }),
      undefined,
      { q: 100, w: 60 },
    ],
    ['slidingLog 5 per 15 minutes', slidingLog({ limit: 5, windowMs: 900_000 }), undefined, { q: 5, w: 900 }],
    [
      'tokenBucket 100, 10 per second',
      tokenBucket({ capacity: 100, refillPerSecond: 10 }),
      undefined,
      { q: 100, w: 10 },
    ],
    [
      'tokenBucket 3, 3 per second',
      tokenBucket({ capacity: 3, refillPerSecond: 3 }),
      undefined,
      { q: 3, w: 1 },
    ],
    ['gcra 10 per minute', gcra({ limit: 10, periodMs: 60_000 }), undefined, { q: 10, w: 60 }],
    [
      'gcra 10 per minute, burst 2',
      gcra({ limit: 10, periodMs: 60_000, burst: 2 }),
      undefined,
      { q: 2, w: 12 },
    ],
    ['gcra 3 per second', gcra({ limit: 3, periodMs: 1_000 }), undefined, { q: 3, w: 1 }],
    [
      'gcra 100 per minute, burst 20, half the budget',
      gcra({ limit: 100, periodMs: 60_000, burst: 20, share: 0.5 }),
      undefined,
      { q: 10, w: 12 },
    ],
    ['fixedWindow, a request limit of 7', fixedWindow({ limit: 100, windowMs: 60_000 }), 7, { q: 7, w: 60 }],
    [
      'gcra burst 2, a request limit of 20',
      gcra({ limit: 10, periodMs: 60_000, burst: 2 }),
      20,
      { q: 4, w: 12 },
    ],
    [
      'tokenBucket 100, a request limit of 50',
      tokenBucket({ capacity: 100, refillPerSecond: 10 }),
      50,
      { q: 50, w: 10 },
    ],
  ];
  for (const [label, policy, limit, expected] of cases) {
    it(`${label}: q=${expected.q};w=${expected.w}`, async () => {
      assert.deepEqual(await fieldsOf(policy, limit), expected);
    });
  }

  it('a client pacing itself by q/w keeps the rate GCRA grants, burst or not', async () => {
    for (const burst of [1, 2, 5, 10]) {
      const { q, w } = await fieldsOf(gcra({ limit: 10, periodMs: 60_000, burst }));
      assert.equal(q / w, 10 / 60, `burst ${burst}: ${q} per ${w} s is 10 per minute`);
    }
  });
});

describe('RateLimit-Policy names the unit of a policy that counts something else than requests', () => {
  it('qu="content-bytes" for a policy of bytes; nothing for one of tokens, whose unit no field can name', async () => {
    const store = new MemoryStore();
    try {
      const make = (name: string, unit: string) =>
        createLimiter({ store, policy: fixedWindow({ limit: 1000, windowMs: 60_000, unit }), name });
      const config = resolveRateLimitOptions('test', {
        limiter: [make('bytes', 'content-bytes'), make('tokens', 'tokens')],
      });
      const evaluation = await evaluate(config, {}, view, {});
      assert.equal(evaluation.kind, 'allow');
      const headers = evaluation.kind === 'allow' ? evaluation.headers : {};
      assert.equal(headers['RateLimit-Policy'], '"bytes";q=1000;qu="content-bytes";w=60');
      assert.match(headers.RateLimit ?? '', /^"bytes";r=999;t=\d+$/);
    } finally {
      store.close();
    }
  });
});
