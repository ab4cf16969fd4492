// The behaviour every adapter must show, run once per framework and store: headers, 429s, skip, cost, count modes,
// denial handler, the decision in the handler, limits per request, keys, penalties, header styles, proxy warnings.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { afterEach, describe, it } from 'node:test';
import { parseList } from 'structured-headers';
import { clientIp } from '../../../src/http/client-key.js';
import { type SluiceWarning, WARNING_CODES } from '../../../src/http/warnings.js';
import type { Limiter } from '../../../src/index.js';
import { decisionMetrics } from '../../../src/metrics/index.js';
import { type SharedOptions, STREAMED } from './harness/common.js';
import {
  assertProblem,
  type HeaderBag,
  header,
  type InfoSummary,
  memoryLimiter,
  policyItem,
  rateLimitItem,
  SECONDS_LEFT,
  settle,
  type TestLimiter,
  testClock,
} from './support.js';

export interface Reply {
  readonly status: number;
  readonly headers: HeaderBag;
  readonly body: string;
}

export interface SendOptions {
  /** Sends the request without a peer address (only where the runtime may give none: fetch, Hono). */
  readonly noPeer?: boolean;
}

/** An app under test, driven in-process. */
export interface Harness {
  /**
   * GET `path`: `/ok` answers 200, `/fail` 401, `/health` 200 (skipped), `/info` the decision the
   * handler read (see describeInfo), `/stream` 200 with STREAMED's chunks written apart,
   * `/admin/key` the middleware's clientKey and `/admin/reset` its resetKey (both skipped). Errors
   * answer 500 with the SluiceError's code.
   */
  send(path: string, headers?: Record<string, string>, options?: SendOptions): Promise<Reply>;
  /** The identifier the adapter keys this harness's requests by (its peer, a private or loopback address). */
  readonly key: string;
  close(): Promise<void>;
}

/**
 * What each adapter's builder must wire (see harness/common.ts): the limiters, `cost` from the
 * `x-cost` header (default 1), `skip` for `/health` and `/admin/*`, the `count` mode, an async key
 * from `x-client` and an async limit from `x-limit` when asked, the shared options as they are,
 * and (with `customDenial`) an `onDenied` that answers 429 with the text `slow down`.
 */
export interface Scenario {
  readonly limiter: Limiter | readonly Limiter[];
  readonly count?: 'all' | 'failed' | 'successful';
  readonly customDenial?: boolean;
  readonly keyByHeader?: boolean;
  readonly limitByHeader?: boolean;
  /** The actual cost once the response finished: the `x-actual` header, or the body's bytes (`bodyBytes()`). */
  readonly settle?: 'header' | 'bytes';
  readonly shared?: SharedOptions;
}

export type Build = (scenario: Scenario) => Promise<Harness>;

/**
 * Makes a fixed-window limiter of `limit` per minute at the test clock (or `clock`); memory by
 * default; with `overrides`, reading what is stored for identifiers.
 */
export type MakeLimiter = (
  limit: number,
  name?: string,
  clock?: () => number,
  overrides?: boolean,
) => TestLimiter;

/** What an adapter can be asked that others cannot. */
export interface Capabilities {
  /** Requests may come without a peer address (fetch, Hono): see {@link SendOptions.noPeer}. */
  readonly noPeer?: boolean;
}

const SECRET = 'a secret of the test fleet';

/** The `pk` the middleware must send for a key: HMAC-SHA256 under the secret, 12 bytes. */
function expectedPk(key: string): string {
  return createHmac('sha256', SECRET).update(key).digest().subarray(0, 12).toString('base64');
}

/** The parameters of the first item of a structured-field list, with byte sequences as base64. */
function firstItemParams(value: string | undefined): { name: unknown; params: Record<string, unknown> } {
  assert.ok(value !== undefined, 'the field is present');
  const [item] = parseList(value);
  assert.ok(item !== undefined && !Array.isArray(item[0]));
  const params: Record<string, unknown> = {};
  for (const [name, param] of item[1]) {
    params[name] = param instanceof ArrayBuffer ? Buffer.from(param).toString('base64') : param;
  }
  return { name: item[0], params };
}

export function conformance(
  adapter: string,
  build: Build,
  makeLimiter: MakeLimiter = memoryLimiter,
  capabilities: Capabilities = {},
): void {
  describe(`${adapter}: common behaviour`, () => {
    const opened: Array<{ close(): unknown }> = [];
    const limiterOf = (
      limit: number,
      name?: string,
      clock?: () => number,
      overrides?: boolean,
    ): TestLimiter => {
      const made = makeLimiter(limit, name, clock, overrides);
      opened.push(made);
      return made;
    };
    const start = async (scenario: Scenario): Promise<Harness> => {
      const harness = await build(scenario);
      opened.push(harness);
      return harness;
    };
    const infoOf = (reply: Reply): InfoSummary => {
      assert.equal(reply.status, 200, reply.body);
      return JSON.parse(reply.body) as InfoSummary;
    };
    afterEach(async () => {
      for (const item of opened.splice(0)) await item.close();
    });

    it('allowed responses carry RateLimit and RateLimit-Policy items that parse as structured fields', async () => {
      const app = await start({ limiter: limiterOf(3).limiter });
      for (const expected of [2, 1, 0]) {
        const reply = await app.send('/ok');
        assert.equal(reply.status, 200);
        assert.equal(reply.body, 'ok');
        assert.deepEqual(rateLimitItem(reply.headers, 'api'), { r: expected, t: SECONDS_LEFT });
        assert.deepEqual(policyItem(reply.headers, 'api'), { q: 3, w: 60 });
        assert.equal(header(reply.headers, 'retry-after'), undefined);
      }
    });

    it('the limit+1-th request gets 429 with Retry-After, RateLimit and a problem+json body', async () => {
      const app = await start({ limiter: limiterOf(3).limiter });
      for (let i = 0; i < 3; i++) assert.equal((await app.send('/ok')).status, 200);
      const refused = await app.send('/ok');
      assert.equal(refused.status, 429);
      assert.equal(header(refused.headers, 'retry-after'), String(SECONDS_LEFT));
      assert.deepEqual(rateLimitItem(refused.headers, 'api'), { r: 0, t: SECONDS_LEFT });
      assert.deepEqual(policyItem(refused.headers, 'api'), { q: 3, w: 60 });
      assertProblem(header(refused.headers, 'content-type'), refused.body, ['api']);
      const again = await app.send('/ok');
      assert.equal(again.status, 429, 'a refused request consumed nothing, and the next is refused too');
    });

    it('skip: skipped requests are not counted and carry no headers', async () => {
      const app = await start({ limiter: limiterOf(3).limiter });
      for (let i = 0; i < 5; i++) {
        const reply = await app.send('/health');
        assert.equal(reply.status, 200);
        assert.equal(header(reply.headers, 'ratelimit'), undefined);
      }
      assert.equal(rateLimitItem((await app.send('/ok')).headers, 'api').r, 2);
    });

    it('cost: a request takes its cost; one that does not fit is refused and takes nothing', async () => {
      const { limiter } = limiterOf(3);
      const app = await start({ limiter });
      assert.equal(rateLimitItem((await app.send('/ok', { 'x-cost': '2' })).headers, 'api').r, 1);
      const refused = await app.send('/ok', { 'x-cost': '2' });
      assert.equal(refused.status, 429);
      assert.equal(rateLimitItem(refused.headers, 'api').r, 1);
      const last = await app.send('/ok', { 'x-cost': '1' });
      assert.equal(last.status, 200);
      assert.equal(rateLimitItem(last.headers, 'api').r, 0);
      assert.equal((await limiter.peek(app.key)).remaining, 0);
    });

    it("count: 'failed' refunds successes after the response and counts failures", async () => {
      const { limiter } = limiterOf(2);
      const app = await start({ limiter, count: 'failed' });
      for (let i = 0; i < 5; i++) {
        assert.equal((await app.send('/ok')).status, 200, `success ${i + 1} passes`);
        await settle();
      }
      assert.equal((await limiter.peek(app.key)).remaining, 2, 'successes were all refunded');
      assert.equal((await app.send('/fail')).status, 401);
      await settle();
      assert.equal((await app.send('/fail')).status, 401);
      await settle();
      assert.equal((await limiter.peek(app.key)).remaining, 0, 'failures were kept');
      const refused = await app.send('/fail');
      assert.equal(refused.status, 429);
      assertProblem(header(refused.headers, 'content-type'), refused.body, ['api']);
      assert.equal((await app.send('/ok')).status, 429, 'failures use up the budget of every request');
    });

    it("count: 'successful' refunds failures", async () => {
      const { limiter } = limiterOf(2);
      const app = await start({ limiter, count: 'successful' });
      for (let i = 0; i < 4; i++) {
        assert.equal((await app.send('/fail')).status, 401);
        await settle();
      }
      assert.equal((await limiter.peek(app.key)).remaining, 2);
      assert.equal((await app.send('/ok')).status, 200);
      await settle();
      assert.equal((await limiter.peek(app.key)).remaining, 1);
    });

    it('settle: once the response finished, a lower actual gives back and a higher one charges, into debt', async () => {
      const { limiter } = limiterOf(100);
      const app = await start({ limiter, settle: 'header' });
      const first = await app.send('/ok', { 'x-cost': '10', 'x-actual': '4' });
      // The headers tell what the estimate left; the difference is settled after the response.
      assert.equal(rateLimitItem(first.headers, 'api').r, 90);
      await settle();
      assert.equal((await limiter.peek(app.key)).remaining, 96);
      const big = await app.send('/stream', { 'x-cost': '10', 'x-actual': '150' });
      assert.equal(big.status, 200);
      await settle();
      // 4 + 150 of 100: 54 owed, and every request is refused until they are paid.
      const refused = await app.send('/ok', { 'x-cost': '1', 'x-actual': '1' });
      assert.equal(refused.status, 429);
      assert.equal((await limiter.charge(app.key, 1)).debt, 55);
    });

    it('settle with bodyBytes(): the bytes of the body, a streamed one counted to its end', async () => {
      const { limiter } = limiterOf(1000);
      const app = await start({ limiter, settle: 'bytes' });
      assert.equal((await app.send('/ok', { 'x-cost': '10' })).body, 'ok');
      await settle();
      assert.equal((await limiter.peek(app.key)).remaining, 998);
      const streamed = await app.send('/stream', { 'x-cost': '10' });
      assert.equal(streamed.body, STREAMED.join(''));
      await settle();
      assert.equal((await limiter.peek(app.key)).remaining, 998 - 150);
    });

    it('several limiters: one RateLimit item each; a refusal by one gives back what the other took', async () => {
      const api = limiterOf(5, 'api').limiter;
      const burst = limiterOf(2, 'burst').limiter;
      const app = await start({ limiter: [api, burst] });
      await app.send('/ok');
      const second = await app.send('/ok');
      assert.deepEqual(rateLimitItem(second.headers, 'api'), { r: 3, t: SECONDS_LEFT });
      assert.deepEqual(rateLimitItem(second.headers, 'burst'), { r: 0, t: SECONDS_LEFT });
      assert.deepEqual(policyItem(second.headers, 'burst'), { q: 2, w: 60 });
      const refused = await app.send('/ok');
      assert.equal(refused.status, 429);
      assertProblem(header(refused.headers, 'content-type'), refused.body, ['burst']);
      assert.deepEqual(rateLimitItem(refused.headers, 'api'), { r: 3, t: SECONDS_LEFT });
      assert.equal((await api.peek(app.key)).remaining, 3, "api's grant was refunded");
    });

    it('a custom denial handler answers instead, with the headers already set', async () => {
      const app = await start({ limiter: limiterOf(1).limiter, customDenial: true });
      await app.send('/ok');
      const refused = await app.send('/ok');
      assert.equal(refused.status, 429);
      assert.equal(refused.body, 'slow down');
      assert.equal(header(refused.headers, 'retry-after'), String(SECONDS_LEFT));
      assert.deepEqual(rateLimitItem(refused.headers, 'api'), { r: 0, t: SECONDS_LEFT });
    });
    it('the handler reads the decision: limit, remaining, reset and key of the request', async () => {
      const app = await start({ limiter: limiterOf(3).limiter });
      const first = infoOf(await app.send('/info'));
      assert.deepEqual(first, {
        limit: 3,
        remaining: 2,
        resetMs: SECONDS_LEFT * 1000,
        key: app.key,
        policies: ['api'],
      });
      assert.equal(infoOf(await app.send('/info')).remaining, 1);
      assert.equal((await app.send('/health')).body, 'up');
    });

    it('limits per request: an async function of the request sets the quota; headers and handler report it', async () => {
      const { limiter } = limiterOf(3);
      const app = await start({ limiter, limitByHeader: true });
      const pro = await app.send('/ok', { 'x-limit': '5' });
      assert.deepEqual(policyItem(pro.headers, 'api'), { q: 5, w: 60 });
      assert.deepEqual(rateLimitItem(pro.headers, 'api'), { r: 4, t: SECONDS_LEFT });
      assert.deepEqual(
        [infoOf(await app.send('/info', { 'x-limit': '5' }))].map(({ limit, remaining }) => ({
          limit,
          remaining,
        })),
        [{ limit: 5, remaining: 3 }],
      );
      const own = await app.send('/ok');
      assert.deepEqual(
        policyItem(own.headers, 'api'),
        { q: 3, w: 60 },
        'without the header, the policy’s own',
      );
      assert.deepEqual(rateLimitItem(own.headers, 'api'), { r: 0, t: SECONDS_LEFT });
      assert.equal(
        (await app.send('/ok')).status,
        429,
        'three taken: the policy’s own limit of 3 is used up',
      );
      const larger = await app.send('/ok', { 'x-limit': '5' });
      assert.equal(larger.status, 200, 'the larger plan still has room');
      assert.deepEqual(rateLimitItem(larger.headers, 'api'), { r: 1, t: SECONDS_LEFT });
      const invalid = await app.send('/ok', { 'x-limit': '0' });
      assert.equal(invalid.status, 500);
      assert.equal(invalid.body, 'ERR_SLUICE_INVALID_LIMIT');
    });

    it('an async key function: each key has its own quota, and clientKey tells which', async () => {
      const { limiter } = limiterOf(2);
      const app = await start({ limiter, keyByHeader: true });
      for (const client of ['alice', 'alice', 'bob']) {
        assert.equal((await app.send('/ok', { 'x-client': client })).status, 200);
      }
      assert.equal((await app.send('/ok', { 'x-client': 'alice' })).status, 429);
      assert.equal((await limiter.peek('bob')).remaining, 1);
      assert.equal((await app.send('/admin/key', { 'x-client': 'bob' })).body, 'bob');
    });

    it('clientKey and resetKey: the peer address by default; a reset gives the full quota back', async () => {
      const { limiter } = limiterOf(2);
      const app = await start({ limiter });
      assert.equal((await app.send('/admin/key')).body, app.key);
      await app.send('/ok');
      await app.send('/ok');
      assert.equal((await app.send('/ok')).status, 429);
      assert.equal((await app.send('/admin/reset')).body, 'reset');
      const after = await app.send('/ok');
      assert.equal(after.status, 200);
      assert.deepEqual(rateLimitItem(after.headers, 'api'), { r: 1, t: SECONDS_LEFT });
    });

    it("headers 'draft-7': RateLimit as limit, remaining, reset and RateLimit-Policy as q;w", async () => {
      const app = await start({ limiter: limiterOf(3).limiter, shared: { headers: 'draft-7' } });
      const reply = await app.send('/ok');
      assert.equal(header(reply.headers, 'ratelimit'), `limit=3, remaining=2, reset=${SECONDS_LEFT}`);
      assert.equal(header(reply.headers, 'ratelimit-policy'), '3;w=60');
    });

    it("headers 'draft-8': items named after the quota, with the pk of the client's key when asked", async () => {
      const app = await start({
        limiter: limiterOf(3).limiter,
        shared: { headers: 'draft-8', partitionKey: { secret: SECRET } },
      });
      const reply = await app.send('/ok');
      const pk = expectedPk(app.key);
      assert.equal(header(reply.headers, 'ratelimit'), `"3-in-1min"; r=2; t=${SECONDS_LEFT}; pk=:${pk}:`);
      assert.equal(header(reply.headers, 'ratelimit-policy'), `"3-in-1min"; q=3; w=60; pk=:${pk}:`);
      assert.deepEqual(firstItemParams(header(reply.headers, 'ratelimit')), {
        name: '3-in-1min',
        params: { r: 2, t: SECONDS_LEFT, pk },
      });
      assert.equal(header(reply.headers, 'ratelimit')?.includes(app.key), false, 'the address is not sent');
    });

    it('pk on the IETF items: a keyed hash per client, never the key', async () => {
      const app = await start({
        limiter: limiterOf(3).limiter,
        keyByHeader: true,
        shared: { partitionKey: { secret: SECRET } },
      });
      const pks = [];
      for (const client of ['alice', 'bob', 'alice']) {
        const { params } = firstItemParams(
          header((await app.send('/ok', { 'x-client': client })).headers, 'ratelimit'),
        );
        pks.push(params.pk);
      }
      assert.deepEqual(pks, [expectedPk('alice'), expectedPk('bob'), expectedPk('alice')]);
      assert.notEqual(pks[0], pks[1]);
    });

    it('ban: after N refusals within the window, 403 until the ban ends, then normal service', async () => {
      const clock = testClock();
      const { limiter } = limiterOf(2, 'api', clock.now);
      const app = await start({
        limiter,
        shared: { ban: { after: 1, windowMs: 60_000, durationMs: 30_000 } },
      });
      assert.deepEqual(
        [await app.send('/ok'), await app.send('/ok'), await app.send('/ok')].map((reply) => reply.status),
        [200, 200, 429],
        'one refusal is tolerated',
      );
      const banned = await app.send('/ok');
      assert.equal(banned.status, 403, 'the second refusal within the window bans');
      assert.equal(header(banned.headers, 'retry-after'), '30');
      const problem = JSON.parse(banned.body) as { status: number; 'violated-policies': string[] };
      assert.equal(problem.status, 403);
      assert.deepEqual(problem['violated-policies'], ['api', 'api:ban']);
      clock.advance(29_000); // the limiter's window has ended: only the ban refuses now
      const still = await app.send('/ok');
      assert.equal(still.status, 403);
      assert.equal(header(still.headers, 'retry-after'), '1');
      clock.advance(1_000);
      const back = await app.send('/ok');
      assert.equal(back.status, 200, 'the ban is over');
      assert.equal(rateLimitItem(back.headers, 'api').r, 1);
    });

    it('resetKey lifts a ban', async () => {
      const { limiter } = limiterOf(1);
      const app = await start({
        limiter,
        shared: { ban: { after: 0, windowMs: 60_000, durationMs: 600_000 } },
      });
      await app.send('/ok');
      assert.equal((await app.send('/ok')).status, 403, 'after: 0 bans at the first refusal');
      assert.equal((await app.send('/ok')).status, 403);
      await app.send('/admin/reset');
      assert.equal((await app.send('/ok')).status, 200);
    });

    it('block: a refused client stays refused for the block, whatever its limiter says by then', async () => {
      const clock = testClock();
      const { limiter } = limiterOf(1, 'api', clock.now);
      const app = await start({ limiter, shared: { block: { durationMs: 45_000 } } });
      assert.equal((await app.send('/ok')).status, 200);
      const refused = await app.send('/ok');
      assert.equal(refused.status, 429);
      assert.equal(header(refused.headers, 'retry-after'), '45', 'the block, not the window’s 20 s');
      assert.deepEqual(rateLimitItem(refused.headers, 'api:block'), { r: 0, t: 45 });
      clock.advance(SECONDS_LEFT * 1000); // a new window: the limiter alone would allow
      const blocked = await app.send('/ok');
      assert.equal(blocked.status, 429);
      assert.equal(header(blocked.headers, 'retry-after'), '25');
      assert.equal((await limiter.peek(app.key)).remaining, 1, 'a blocked request takes nothing');
      clock.advance(25_000);
      assert.equal((await app.send('/ok')).status, 200);
    });

    it('a private peer sending X-Forwarded-For while no proxy is trusted: one warning, with its code', async () => {
      const warnings: SluiceWarning[] = [];
      const app = await start({
        limiter: limiterOf(5).limiter,
        shared: { onWarning: (warning) => warnings.push(warning) },
      });
      for (let i = 0; i < 3; i++) await app.send('/ok', { 'X-Forwarded-For': '198.51.100.7' });
      assert.deepEqual(
        warnings.map((warning) => warning.code),
        [WARNING_CODES.FORWARDED_UNTRUSTED],
      );
      assert.match(warnings[0]?.message ?? '', /trustProxy/);
      assert.equal((await app.send('/admin/key', { 'X-Forwarded-For': '198.51.100.7' })).body, app.key);
      const quiet: SluiceWarning[] = [];
      const off = await start({
        limiter: limiterOf(5, 'quiet').limiter,
        shared: {
          warnings: { SLUICE_FORWARDED_UNTRUSTED: false },
          onWarning: (warning) => quiet.push(warning),
        },
      });
      await off.send('/ok', { 'X-Forwarded-For': '198.51.100.7' });
      assert.deepEqual(quiet, [], 'turned off by its code');
    });

    it('trustProxy counting more hops than the request has: one warning, with its code', async () => {
      const warnings: SluiceWarning[] = [];
      const app = await start({
        limiter: limiterOf(5).limiter,
        shared: { key: clientIp({ trustProxy: 2 }), onWarning: (warning) => warnings.push(warning) },
      });
      await app.send('/ok', { 'X-Forwarded-For': '198.51.100.7' });
      await app.send('/ok', { 'X-Forwarded-For': '198.51.100.8' });
      await app.send('/ok', { 'X-Forwarded-For': '203.0.113.1, 198.51.100.9' });
      assert.deepEqual(
        warnings.map((warning) => warning.code),
        [WARNING_CODES.PROXY_HOPS_MISSING],
      );
      const quiet: SluiceWarning[] = [];
      const off = await start({
        limiter: limiterOf(5, 'quiet').limiter,
        shared: {
          key: clientIp({ trustProxy: 2 }),
          warnings: false,
          onWarning: (warning) => quiet.push(warning),
        },
      });
      await off.send('/ok', { 'X-Forwarded-For': '198.51.100.7' });
      assert.deepEqual(quiet, []);
    });

    it('allow: a listed client is not counted and gets no headers; a client off the list is', async () => {
      const { limiter } = limiterOf(1);
      const app = await start({
        limiter,
        keyByHeader: true,
        shared: { allow: ['10.0.0.0/8', 'trusted-key'] },
      });
      for (const client of ['10.9.8.7', '10.9.8.7', 'trusted-key', 'trusted-key']) {
        const reply = await app.send('/ok', { 'x-client': client });
        assert.equal(reply.status, 200);
        assert.equal(header(reply.headers, 'ratelimit'), undefined, 'no headers: not limited');
      }
      assert.equal((await limiter.peek('10.9.8.7')).remaining, 1, 'nothing was counted');
      assert.equal((await app.send('/ok', { 'x-client': '11.0.0.1' })).status, 200);
      assert.equal((await app.send('/ok', { 'x-client': '11.0.0.1' })).status, 429);
    });

    it('deny: a listed identifier or range gets 403 with a problem body, no limiter asked; a neighbour /48 is served', async () => {
      const { limiter } = limiterOf(5);
      const metrics = decisionMetrics();
      const app = await start({
        limiter,
        keyByHeader: true,
        shared: { deny: ['2001:db8:1::/48', 'stolen-key'], allow: ['2001:db8:1:7::/64'], metrics },
      });
      for (const client of ['2001:db8:1:ffff::1', 'stolen-key']) {
        const refused = await app.send('/ok', { 'x-client': client });
        assert.equal(refused.status, 403);
        assert.match(header(refused.headers, 'content-type') ?? '', /^application\/problem\+json/);
        const problem = JSON.parse(refused.body) as Record<string, unknown>;
        assert.deepEqual([problem.status, problem.title], [403, 'Forbidden']);
        assert.equal(header(refused.headers, 'retry-after'), undefined, 'the list does not end');
        assert.equal((await limiter.peek(client)).remaining, 5, 'the limiter was not asked');
      }
      const neighbour = await app.send('/ok', { 'x-client': '2001:db8:2::1' });
      assert.equal(neighbour.status, 200);
      assert.equal(rateLimitItem(neighbour.headers, 'api').r, 4);
      assert.equal((await app.send('/ok', { 'x-client': '2001:db8:1:7::9' })).status, 200, 'allow wins');
      assert.equal(metrics.snapshot()[0]?.listDenials.middleware, 2);
    });

    it('deny by range on address keys: every /56 key inside a /48 is refused, the next /48 is not', async () => {
      const { limiter } = limiterOf(5);
      const app = await start({
        limiter,
        shared: { key: clientIp({ trustProxy: ['loopback', 'uniquelocal'] }), deny: ['2001:db8:1::/48'] },
      });
      const from = (address: string) => app.send('/ok', { 'X-Forwarded-For': address });
      assert.equal((await from('2001:db8:1:ab00::1')).status, 403);
      assert.equal((await from('2001:db8:1:ffff:ffff::1')).status, 403);
      assert.equal((await from('2001:db8:0:ffff::1')).status, 200);
      assert.equal((await from('2001:db8:2::1')).status, 200);
    });

    it("a limiter's stored denial answers 403 with Retry-After, naming the limiter, until it ends", async () => {
      const clock = testClock();
      const { limiter } = limiterOf(5, 'api', clock.now, true);
      const metrics = decisionMetrics();
      const app = await start({ limiter, shared: { metrics } });
      assert.equal((await app.send('/ok')).status, 200);
      await limiter.deny(app.key, { forMs: 10_000 });
      const refused = await app.send('/ok');
      assert.equal(refused.status, 403);
      assert.equal(header(refused.headers, 'retry-after'), '10');
      const problem = JSON.parse(refused.body) as Record<string, unknown>;
      assert.deepEqual([problem.title, problem['violated-policies']], ['Forbidden', ['api']]);
      assert.equal(metrics.snapshot()[0]?.listDenials.store, 1);
      clock.advance(10_000);
      const back = await app.send('/ok');
      assert.equal(back.status, 200);
      assert.equal(
        rateLimitItem(back.headers, 'api').r,
        3,
        'only the first request and this one were counted',
      );
    });

    if (capabilities.noPeer === true) {
      it('no client address: a configuration error, never one bucket shared by every client', async () => {
        const { limiter } = limiterOf(5);
        const app = await start({ limiter });
        const reply = await app.send('/ok', {}, { noPeer: true });
        assert.equal(reply.status, 500);
        assert.equal(reply.body, 'ERR_SLUICE_NO_CLIENT_ADDRESS');
        assert.equal((await limiter.peek('(unknown)')).remaining, 5, 'nothing was counted');
        const strict = await start({
          limiter: limiterOf(5, 'strict').limiter,
          shared: { missingKey: 'deny' },
        });
        const denied = await strict.send('/ok', {}, { noPeer: true });
        assert.equal(denied.status, 400, "missingKey: 'deny' answers 400 instead");
        assert.match(denied.body, /client IP/);
      });
    }
  });
}
