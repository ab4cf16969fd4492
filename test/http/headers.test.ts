// The framework-free headers and problem bodies: structured-field syntax, several policies, odd numbers, shadow and failure.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseList } from 'structured-headers';
import { quotaName } from '../../src/http/header-styles.js';
import { type PolicyDecision, rateLimitHeaders, sfString } from '../../src/http/headers.js';
import { problemDetails, refusalFor } from '../../src/http/problem.js';
import type { Decision } from '../../src/index.js';
import { parseItems } from '../helpers/http/support.js';

const allowed = (overrides: Partial<Decision> = {}): Decision => ({
  allowed: true,
  limit: 100,
  remaining: 99,
  resetMs: 60_000,
  retryAfterMs: 0,
  ...overrides,
});
const denied = (overrides: Partial<Decision> = {}): Decision => ({
  allowed: false,
  limit: 100,
  remaining: 0,
  resetMs: 60_000,
  retryAfterMs: 12_300,
  ...overrides,
});
const entry = (name: string, decision: Decision, windowMs = 60_000): PolicyDecision => ({
  name,
  windowMs,
  decision,
});

describe('rateLimitHeaders: units', () => {
  const bytes = (decision: Decision): PolicyDecision => ({
    ...entry('bytes', decision),
    unit: 'content-bytes',
  });
  const tokens = (decision: Decision): PolicyDecision => ({ ...entry('tokens', decision), unit: 'tokens' });

  it('a registered unit is named by qu in the item lists; requests, the default, never are', () => {
    const headers = rateLimitHeaders([
      entry('api', allowed()),
      { ...entry('calls', allowed()), unit: 'requests' },
      bytes(allowed({ limit: 1_000_000, remaining: 400_000 })),
    ]);
    assert.deepEqual(parseItems(headers['RateLimit-Policy']), [
      { name: 'api', params: { q: 100, w: 60 } },
      { name: 'calls', params: { q: 100, w: 60 } },
      { name: 'bytes', params: { q: 1_000_000, w: 60 }, qu: 'content-bytes' },
    ]);
    const draft8 = rateLimitHeaders([bytes(allowed())], { style: 'draft-8' });
    assert.match(draft8['RateLimit-Policy'] as string, /; qu="content-bytes"; w=60$/);
  });

  it('styles without units, and units nobody registered, leave the policy out rather than call it requests', () => {
    const both = [entry('api', allowed({ remaining: 7 })), bytes(allowed({ limit: 5_000, remaining: 1 }))];
    const legacy = rateLimitHeaders(both, { style: ['draft-6', 'legacy'] });
    assert.deepEqual(
      [legacy['RateLimit-Limit'], legacy['RateLimit-Remaining'], legacy['X-RateLimit-Remaining']],
      ['100', '7', '7'],
    );
    const ietf = rateLimitHeaders([entry('api', allowed()), tokens(allowed({ remaining: 3 }))]);
    assert.deepEqual(
      parseItems(ietf.RateLimit).map((item) => item.name),
      ['api'],
    );
    // Alone, a policy of tokens writes no field; a refusal by it still says when to come back.
    const refused = rateLimitHeaders([tokens(denied({ retryAfterMs: 4_000 }))]);
    assert.deepEqual(refused, { 'Retry-After': '4' });
  });
});

describe('rateLimitHeaders', () => {
  it('ietf: one item per policy in RateLimit-Policy (q, w) and RateLimit (r, t), parsed as RFC 8941 lists', () => {
    const headers = rateLimitHeaders([
      entry('api', allowed({ remaining: 42, resetMs: 30_500 })),
      entry('daily', allowed({ limit: 10_000, remaining: 9_000, resetMs: 3_600_000 }), 86_400_000),
    ]);
    assert.deepEqual(parseItems(headers['RateLimit-Policy']), [
      { name: 'api', params: { q: 100, w: 60 } },
      { name: 'daily', params: { q: 10_000, w: 86_400 } },
    ]);
    assert.deepEqual(parseItems(headers.RateLimit), [
      { name: 'api', params: { r: 42, t: 31 } },
      { name: 'daily', params: { r: 9_000, t: 3_600 } },
    ]);
    assert.equal(headers['Retry-After'], undefined);
    assert.equal(headers['RateLimit-Limit'], undefined, 'draft-6 fields only when asked for');
  });

  it('a refusal adds Retry-After (seconds, rounded up) and t is the wait', () => {
    const headers = rateLimitHeaders([entry('api', denied({ retryAfterMs: 12_001 }))]);
    assert.equal(headers['Retry-After'], '13');
    assert.deepEqual(parseItems(headers.RateLimit), [{ name: 'api', params: { r: 0, t: 13 } }]);
  });

  it('Retry-After is the longest wait of the refusing policies, and at least 1', () => {
    const headers = rateLimitHeaders([
      entry('a', denied({ retryAfterMs: 2_000 })),
      entry('b', denied({ retryAfterMs: 9_000 })),
      entry('c', allowed()),
    ]);
    assert.equal(headers['Retry-After'], '9');
    assert.equal(rateLimitHeaders([entry('a', denied({ retryAfterMs: 0 }))])['Retry-After'], '1');
  });

  it('draft-6 and legacy describe the most constraining policy', () => {
    const headers = rateLimitHeaders(
      [
        entry('wide', allowed({ limit: 1000, remaining: 700 })),
        entry('narrow', allowed({ limit: 10, remaining: 3, resetMs: 4_200 })),
      ],
      { style: ['draft-6', 'legacy'], now: 1_700_000_000_500 },
    );
    assert.deepEqual(headers, {
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '3',
      'RateLimit-Reset': '5',
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '3',
      'X-RateLimit-Reset': String(Math.ceil((1_700_000_000_500 + 4_200) / 1000)),
    });
    const refusedToo = rateLimitHeaders(
      [entry('narrow', allowed({ remaining: 0 })), entry('hard', denied({ remaining: 5 }))],
      {
        style: 'draft-6',
      },
    );
    assert.equal(
      refusedToo['RateLimit-Remaining'],
      '5',
      'a refusing policy outranks one with less remaining',
    );
    assert.equal(refusedToo['RateLimit-Reset'], '13');
  });

  it('NaN, negative, infinite and fractional numbers never reach a header', () => {
    const odd = [
      entry('nan', allowed({ limit: Number.NaN, remaining: Number.NaN, resetMs: Number.NaN })),
      entry('negative', denied({ limit: -5, remaining: -3, resetMs: -10, retryAfterMs: -1 }), -1),
      entry('fraction', allowed({ limit: 10.7, remaining: 2.5, resetMs: 1.2 }), 0.4),
      entry(
        'infinite',
        allowed({
          limit: Number.POSITIVE_INFINITY,
          remaining: Number.POSITIVE_INFINITY,
          resetMs: Number.POSITIVE_INFINITY,
        }),
      ),
    ];
    const headers = rateLimitHeaders(odd, { style: ['ietf', 'draft-6', 'legacy'], now: Number.NaN });
    for (const [name, value] of Object.entries(headers)) {
      if (name === 'RateLimit' || name === 'RateLimit-Policy') {
        for (const item of parseItems(value)) {
          for (const number of Object.values(item.params))
            assert.ok(Number.isSafeInteger(number) && number >= 0, `${name}: ${value}`);
          if (name === 'RateLimit-Policy') assert.ok((item.params.w ?? 0) >= 1, 'w is at least 1');
        }
      } else {
        assert.match(value, /^\d+$/, `${name}: ${value}`);
      }
    }
    assert.deepEqual(parseItems(headers.RateLimit)[2], { name: 'fraction', params: { r: 2, t: 1 } });
  });

  it('the same policy twice gives one item, the more constraining', () => {
    const headers = rateLimitHeaders([
      entry('api', allowed({ remaining: 9 })),
      entry('api', allowed({ remaining: 4 })),
    ]);
    assert.deepEqual(parseItems(headers.RateLimit), [{ name: 'api', params: { r: 4, t: 60 } }]);
  });

  it('policy names are escaped into valid sf-strings', () => {
    assert.equal(sfString('a"b\\c'), '"a\\"b\\\\c"');
    const headers = rateLimitHeaders([entry('we"ird\\näme', allowed())]);
    assert.deepEqual(
      parseItems(headers.RateLimit).map((item) => item.name),
      ['we"ird\\n?me'],
    );
  });

  it('shadow decisions (wouldAllow) never refuse and stay invisible', () => {
    const shadow = entry('shadow', allowed({ remaining: 0, wouldAllow: false }));
    assert.deepEqual(rateLimitHeaders([shadow]), {});
    assert.equal(problemDetails([shadow]), undefined);
    const odd = entry('shadow', { ...denied(), wouldAllow: false });
    assert.equal(refusalFor([odd]), undefined, 'even a shadow decision marked not allowed is not enforced');
  });

  it('decisions without store numbers (store-error, timeout) add no items; fallback and cached do', () => {
    const headers = rateLimitHeaders([
      entry('open', allowed({ reason: 'store-error' })),
      entry('slow', allowed({ reason: 'timeout' })),
      entry('fallback', allowed({ reason: 'fallback', remaining: 7 })),
      entry('cached', denied({ reason: 'cached' })),
    ]);
    assert.deepEqual(
      parseItems(headers.RateLimit).map((item) => item.name),
      ['fallback', 'cached'],
    );
    assert.equal(headers['Retry-After'], '13');
  });
});

describe('header styles', () => {
  const two = [
    entry('api', allowed({ remaining: 42, resetMs: 30_500 })),
    entry('burst', allowed({ limit: 10, remaining: 3, resetMs: 4_200 }), 1_000),
  ];

  it('draft-7: RateLimit for the most constraining policy, RateLimit-Policy listing each', () => {
    assert.deepEqual(rateLimitHeaders(two, { style: 'draft-7' }), {
      RateLimit: 'limit=10, remaining=3, reset=5',
      'RateLimit-Policy': '100;w=60, 10;w=1',
    });
  });

  it('draft-8: items named after their quota, parameters after "; "', () => {
    const headers = rateLimitHeaders(two, { style: 'draft-8' });
    assert.equal(headers.RateLimit, '"100-in-1min"; r=42; t=31, "10-in-1sec"; r=3; t=5');
    assert.equal(headers['RateLimit-Policy'], '"100-in-1min"; q=100; w=60, "10-in-1sec"; q=10; w=1');
    assert.deepEqual(
      parseItems(headers.RateLimit).map((item) => item.params),
      [
        { r: 42, t: 31 },
        { r: 3, t: 5 },
      ],
    );
  });

  it('draft-8 names: seconds, minutes, hours and days as express-rate-limit writes them', () => {
    const names = [30_000, 90_000, 3_600_000, 7_200_000, 86_400_000, 172_800_000].map((windowMs) =>
      quotaName(entry('x', allowed({ limit: 5 }), windowMs)),
    );
    assert.deepEqual(names, [
      '5-in-30sec',
      '5-in-1.5min',
      '5-in-1hr',
      '5-in-2hrs',
      '5-in-1day',
      '5-in-2days',
    ]);
  });

  it('pk: a byte sequence on both fields of the ietf and draft-8 styles, only for entries that carry one', () => {
    const partitionKey = new Uint8Array([1, 2, 3, 250]);
    const keyed = [{ ...entry('api', allowed()), partitionKey }, entry('other', allowed())];
    const ietf = rateLimitHeaders(keyed);
    assert.equal(ietf.RateLimit, '"api";r=99;t=60;pk=:AQID+g==:, "other";r=99;t=60');
    assert.equal(ietf['RateLimit-Policy'], '"api";q=100;w=60;pk=:AQID+g==:, "other";q=100;w=60');
    const [item] = parseList(ietf.RateLimit as string);
    assert.ok(item !== undefined && !Array.isArray(item[0]));
    assert.deepEqual(new Uint8Array(item[1].get('pk') as ArrayBuffer), partitionKey);
    assert.match(rateLimitHeaders(keyed, { style: 'draft-8' }).RateLimit ?? '', /; pk=:AQID\+g==:/);
    assert.doesNotMatch(rateLimitHeaders(keyed, { style: 'draft-7' }).RateLimit ?? '', /pk/);
  });

  it('RateLimit holds one style: the first of ietf, draft-8 and draft-7 asked for', () => {
    const headers = rateLimitHeaders(two, { style: ['draft-7', 'ietf', 'draft-6'] });
    assert.equal(headers.RateLimit, 'limit=10, remaining=3, reset=5');
    assert.equal(headers['RateLimit-Limit'], '10');
  });
});

describe('problem details', () => {
  it('a quota refusal is a 429 of type quota-exceeded naming the violated policies', () => {
    const refusal = refusalFor([entry('api', allowed()), entry('burst', denied({ limit: 5 }), 1_000)]);
    assert.ok(refusal !== undefined);
    assert.equal(refusal.status, 429);
    assert.equal(refusal.headers['Content-Type'], 'application/problem+json');
    assert.equal(refusal.headers['Retry-After'], '13');
    assert.deepEqual(JSON.parse(refusal.body), {
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Too Many Requests',
      status: 429,
      detail: 'Quota exceeded for policy "burst" (5 per 1 s). Retry in 13 s.',
      'violated-policies': ['burst'],
    });
  });

  it('a limiter failing closed is a 503 (temporary reduced capacity), still with Retry-After', () => {
    const refusal = refusalFor([entry('api', denied({ reason: 'store-error', retryAfterMs: 0 }))]);
    assert.ok(refusal !== undefined);
    assert.equal(refusal.status, 503);
    assert.equal(
      refusal.problem.type,
      'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
    );
    assert.equal(refusal.headers['Retry-After'], '1');
    assert.equal(refusal.headers.RateLimit, undefined, 'no made-up numbers');
  });

  it('type and title can be overridden for the 429', () => {
    const problem = problemDetails([entry('api', denied())], {
      type: 'https://example.test/slow-down',
      title: 'Slow down',
    });
    assert.equal(problem?.type, 'https://example.test/slow-down');
    assert.equal(problem?.title, 'Slow down');
  });
});
