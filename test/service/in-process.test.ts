// The service's parts in process: the per-policy headers against rateLimitHeaders, the request log, added routes.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { describe, mock, test } from 'node:test';
import { RequestLog } from '../../packages/server/src/service/request-log.js';
import { createService, Rejection } from '../../packages/server/src/service/service.js';
import { headerRenderer } from '../../packages/server/src/service/service-headers.js';
import { decisionMembers } from '../../packages/server/src/service/service-limit.js';
import { type HeaderStyle, rateLimitHeaders } from '../../src/http/index.js';
import { createLimiter, type Decision, fixedWindow, MemoryStore } from '../../src/index.js';
import { seeded } from '../helpers/random.js';
import { clearOfWindowEnd } from '../helpers/window.js';

describe('the service, in process', () => {
  test('headerRenderer writes what rateLimitHeaders writes, for 20 000 decisions in every style', () => {
    const random = seeded(7);
    const styleSets: HeaderStyle[][] = [
      ['ietf'],
      ['draft-8'],
      ['draft-7'],
      ['draft-6'],
      ['legacy'],
      ['ietf', 'draft-6'],
      ['draft-6', 'ietf', 'legacy'],
      ['draft-7', 'ietf', 'draft-6'],
      ['legacy', 'draft-8', 'legacy'],
      [],
    ];
    const names = ['api', 'a "quoted" name', 'naïve', 'x'];
    const pick = (values: number[]): number => random.pick(values);
    for (let i = 0; i < 20_000; i++) {
      const name = random.pick(names);
      const windowMs = pick([0, 1, 999, 1000, 1001, 60_000, 86_400_000]);
      const style = random.pick(styleSets);
      const render = headerRenderer(name, windowMs, style);
      // Several decisions per renderer: its cached RateLimit-Policy must follow a change of limit.
      for (let j = 0; j < 3; j++) {
        const allowed = random.next() < 0.6;
        const decision: Decision = {
          allowed,
          limit: pick([0, 1, 5, 100, 2.5, Number.NaN]),
          remaining: pick([0, 1, 4.7, 99, -1, Number.NaN]),
          resetMs: pick([0, 1, 999, 1000, 1001, 60_000, Number.POSITIVE_INFINITY, -5]),
          retryAfterMs: allowed ? 0 : pick([0, 1, 1500, 60_000, Number.NaN]),
          ...(random.next() < 0.2 ? { reason: random.pick(['store-error', 'timeout'] as const) } : {}),
          ...(random.next() < 0.1 ? { wouldAllow: random.next() < 0.5 } : {}),
        } as Decision;
        const now = pick([0, 1_796_222_267_157, -1, Number.NaN]);
        const expected = rateLimitHeaders([{ name, windowMs, decision }], { style, now });
        const { flat, json } = render(decision, now);
        const pairs: Record<string, string> = {};
        for (let k = 0; k < flat.length; k += 2) pairs[flat[k] as string] = flat[k + 1] as string;
        assert.deepEqual(pairs, expected, JSON.stringify({ name, windowMs, style, decision, now }));
        assert.deepEqual(Object.keys(pairs), Object.keys(expected), 'in the same order');
        assert.deepEqual(JSON.parse(json), expected);
      }
    }
  });

  test('decisionMembers writes what JSON.stringify writes of the decisions limiters make', async () => {
    // The limiters count past their limit in a minute's window (to a denial, a cached one): it must not end meanwhile.
    await clearOfWindowEnd(60_000, 2_000);
    const store = new MemoryStore();
    try {
      const policy = fixedWindow({ limit: 2, windowMs: 60_000 });
      const plain = createLimiter({ store, policy, name: 'plain' });
      const shadow = createLimiter({ store, policy, name: 'shadow', enforce: false });
      const cached = createLimiter({ store, policy, name: 'cached', denyCache: true });
      const decisions: Decision[] = [];
      for (let i = 0; i < 4; i++) {
        for (const limiter of [plain, shadow, cached]) decisions.push(await limiter.limit('k', { cost: 1 }));
      }
      decisions.push(await plain.peek('k'), await plain.refund('k'));
      assert.ok(decisions.some((d) => d.reason === 'cached'));
      assert.ok(decisions.some((d) => d.wouldAllow === false));
      const random = seeded(9);
      for (let i = 0; i < 2000; i++) {
        const allowed = random.next() < 0.5;
        decisions.push({
          allowed,
          limit: random.pick([1, 100, 2 ** 40]),
          remaining: random.pick([0, 3, 99]),
          resetMs: random.pick([0, 1, 59_999.5, 86_400_000]),
          retryAfterMs: allowed ? 0 : random.pick([1, 1500]),
          ...(random.next() < 0.3 ? { wouldAllow: random.next() < 0.5 } : {}),
          ...(random.next() < 0.3
            ? { reason: random.pick(['store-error', 'timeout', 'fallback', 'cached', 'skipped'] as const) }
            : {}),
        } as Decision);
      }
      for (const decision of decisions) {
        assert.equal(decisionMembers(decision), JSON.stringify(decision).slice(1, -1));
      }
    } finally {
      store.close();
    }
  });

  test('the request log writes one line per interval at most, with the counts by status', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const lines: string[] = [];
      const log = new RequestLog((line) => lines.push(line), 10_000);
      for (let i = 0; i < 5000; i++) log.refused(i % 10 === 0 ? 413 : 400);
      assert.equal(lines.length, 0, 'nothing before the interval ends');
      mock.timers.tick(10_000);
      assert.equal(lines.length, 1);
      assert.match(
        lines[0] as string,
        /^sluice serve: refused 5,000 malformed requests in the last \d+ s \(4,500 x 400, 500 x 413\)$/,
      );
      log.failed(`boom ${'x'.repeat(1000)}`);
      log.failed('second');
      mock.timers.tick(9_999);
      assert.equal(lines.length, 1);
      mock.timers.tick(1);
      assert.equal(lines.length, 2);
      assert.match(
        lines[1] as string,
        /^sluice serve: 2 requests failed in the service in the last \d+ s; the first: boom x+$/,
      );
      assert.ok((lines[1] as string).length < 300, 'the error text is cut short');
      log.flush();
      assert.equal(lines.length, 2, 'nothing new, nothing written');
    } finally {
      mock.timers.reset();
    }
  });

  test('added routes are served beside the built-in ones and can replace them; a Rejection they throw is a problem+json answer', async () => {
    const store = new MemoryStore();
    const limiter = createLimiter({
      store,
      policy: fixedWindow({ limit: 5, windowMs: 60_000 }),
      name: 'api',
    });
    const lines: string[] = [];
    const service = createService({
      limiters: new Map([['api', limiter]]),
      demo: undefined,
      headers: ['ietf'],
      log: new RequestLog((line) => lines.push(line)),
      routes: [
        {
          method: 'GET',
          path: '/metrics',
          summary: 'metrics',
          handle: (_, response) => void response.end('sluice_decisions_total 0\n'),
        },
        {
          method: 'GET',
          path: '/',
          handle: (_, response) => void response.end('<!doctype html><title>dashboard</title>'),
        },
        {
          method: 'POST',
          path: '/refuse',
          handle: () => {
            throw new Rejection(422, 'Unprocessable Content', 'Not today.');
          },
        },
      ],
    });
    const server: Server = createServer(service.listener);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const base = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    try {
      assert.equal(await (await fetch(`${base}/metrics`)).text(), 'sluice_decisions_total 0\n');
      assert.match(await (await fetch(`${base}/`)).text(), /^<!doctype html>/);
      const refused = await fetch(`${base}/refuse`, { method: 'POST' });
      assert.equal(refused.status, 422);
      assert.equal(refused.headers.get('content-type'), 'application/problem+json');
      assert.equal(((await refused.json()) as { detail: string }).detail, 'Not today.');
      const wrongMethod = await fetch(`${base}/metrics`, { method: 'POST' });
      assert.equal(wrongMethod.status, 405);
      assert.equal(wrongMethod.headers.get('allow'), 'GET, HEAD');
      const decided = await fetch(`${base}/v1/limit`, { method: 'POST', body: '{"policy":"api","key":"k"}' });
      assert.equal(((await decided.json()) as { remaining: number }).remaining, 4);
      assert.equal(lines.length, 0, 'refusals are counted, not written one by one');
    } finally {
      server.close();
      store.close();
    }
  });
});
