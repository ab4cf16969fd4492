// The fetch-style adapter, driven with web-standard Requests: the common behaviour, the bare guard, immutable responses.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { rateLimit } from '../../src/http/adapters/fetch.js';
import { clientIp, headerKey } from '../../src/http/client-key.js';
import { SluiceError } from '../../src/index.js';
import { conformance } from '../helpers/http/conformance.js';
import { buildFetch } from '../helpers/http/harness/fetch.js';
import {
  assertProblem,
  memoryLimiter,
  rateLimitItem,
  SECONDS_LEFT,
  type TestLimiter,
} from '../helpers/http/support.js';

function _answer(request: Request): Response {
  const path = new URL(request.url).pathname;
  if (path === '/fail') return new Response('no', { status: 401 });
  return new Response(path === '/health' ? 'up' : 'ok');
}

conformance('fetch', buildFetch, undefined, { noPeer: true });

describe('fetch: specifics', () => {
  const opened: TestLimiter[] = [];
  const limiterOf = (limit: number, name?: string) => {
    const made = memoryLimiter(limit, name);
    opened.push(made);
    return made.limiter;
  };
  afterEach(() => {
    for (const made of opened.splice(0)) made.close();
  });

  it('the bare guard: undefined when allowed (headers() for the response), a 429 Response when not', async () => {
    const limit = rateLimit({ limiter: limiterOf(1), key: headerKey('x-api-key') });
    const first = new Request('http://example.test/', { headers: { 'x-api-key': 'k1' } });
    assert.equal(await limit(first), undefined);
    assert.deepEqual(rateLimitItem(Object.fromEntries(limit.headers(first)), 'api'), {
      r: 0,
      t: SECONDS_LEFT,
    });
    const refused = await limit(new Request('http://example.test/', { headers: { 'x-api-key': 'k1' } }));
    assert.ok(refused instanceof Response);
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('retry-after'), String(SECONDS_LEFT));
    assertProblem(refused.headers.get('content-type') ?? undefined, await refused.text(), ['api']);
    const other = new Request('http://example.test/', { headers: { 'x-api-key': 'k2' } });
    assert.equal(await limit(other), undefined, 'another key has its own budget');
  });

  it("the bare guard with count: 'failed' refunds when complete() reports a success", async () => {
    const limiter = limiterOf(1);
    const limit = rateLimit({ limiter, key: headerKey('x-api-key'), count: 'failed' });
    for (let i = 0; i < 3; i++) {
      const req = new Request('http://example.test/', { headers: { 'x-api-key': 'k' } });
      assert.equal(await limit(req), undefined);
      limit.complete(req, 204);
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal((await limiter.peek('k')).remaining, 1);
  });

  it('headers are added to a response whose headers are immutable', async () => {
    const frozen = Response.redirect('http://example.test/elsewhere', 302);
    // Immutable as the fetch standard has it; Bun's Response.redirect() is not, and the headers are added either way.
    if (!('Bun' in globalThis)) assert.throws(() => frozen.headers.set('x', 'y'), TypeError);
    const handler = rateLimit({ limiter: limiterOf(2), remoteAddress: () => '192.0.2.1' }).wrap(() => frozen);
    const response = await handler(new Request('http://example.test/'));
    assert.equal(response.status, 302);
    assert.equal(response.headers.get('location'), 'http://example.test/elsewhere');
    assert.deepEqual(rateLimitItem(Object.fromEntries(response.headers), 'api'), { r: 1, t: SECONDS_LEFT });
  });

  it('keyed by address without remoteAddress, the middleware is refused at creation', () => {
    const limiter = limiterOf(2);
    for (const options of [{ limiter }, { limiter, key: clientIp({ trustProxy: 1 }) }]) {
      assert.throws(
        () => rateLimit(options),
        (error: unknown) =>
          error instanceof SluiceError &&
          error.code === 'ERR_SLUICE_INVALID_OPTION' &&
          /`remoteAddress`.*share one bucket/.test(error.message),
      );
    }
    assert.doesNotThrow(() => rateLimit({ limiter, key: headerKey('x-api-key') }));
    assert.doesNotThrow(() => rateLimit({ limiter, missingKey: 'deny' }), 'an explicit 400 is not silent');
  });
});

describe('fetch: runtime arguments', () => {
  it('remoteAddress receives what the runtime passes after the request, typed by the caller', async () => {
    const made = memoryLimiter(2);
    try {
      interface ServeInfo {
        readonly remoteAddr: { readonly hostname: string };
      }
      const limit = rateLimit({
        limiter: made.limiter,
        remoteAddress: (_request, info: ServeInfo) => info.remoteAddr.hostname,
      });
      const serve: (request: Request, info: ServeInfo) => Promise<Response> = limit.wrap(
        () => new Response('ok'),
      );
      await serve(new Request('http://example.test/'), { remoteAddr: { hostname: '2001:db8:5:6a00::9' } });
      assert.equal((await made.limiter.peek('2001:db8:5:6a00::/56')).remaining, 1);
    } finally {
      made.close();
    }
  });
});
