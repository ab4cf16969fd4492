// The behaviour every adapter must show, run once per framework: headers, 429s, skip, cost, count modes, denial handler.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { Limiter } from '../../src/index.js';
import {
  assertProblem,
  type HeaderBag,
  header,
  memoryLimiter,
  policyItem,
  rateLimitItem,
  SECONDS_LEFT,
  settle,
  type TestLimiter,
} from './support.js';

export interface Reply {
  readonly status: number;
  readonly headers: HeaderBag;
  readonly body: string;
}

/** An app under test, driven in-process. */
export interface Harness {
  /** GET `path` (`/ok` answers 200, `/fail` 401, `/health` 200 and is skipped). */
  send(path: string, headers?: Record<string, string>): Promise<Reply>;
  /** The identifier the adapter keys this harness's requests by. */
  readonly key: string;
  close(): Promise<void>;
}

/**
 * What each adapter's builder must wire: the limiters, `cost` from the `x-cost` header (default 1),
 * `skip` for `/health`, the `count` mode, and (with `customDenial`) an `onDenied` that answers
 * 429 with the text `slow down`.
 */
export interface Scenario {
  readonly limiter: Limiter | readonly Limiter[];
  readonly count?: 'all' | 'failed' | 'successful';
  readonly customDenial?: boolean;
}

export type Build = (scenario: Scenario) => Promise<Harness>;

/** Makes a fixed-window limiter of `limit` per minute at the test clock; memory by default. */
export type MakeLimiter = (limit: number, name?: string) => TestLimiter;

export function conformance(adapter: string, build: Build, makeLimiter: MakeLimiter = memoryLimiter): void {
  describe(`${adapter}: common behaviour`, () => {
    const opened: Array<{ close(): unknown }> = [];
    const limiterOf = (limit: number, name?: string): TestLimiter => {
      const made = makeLimiter(limit, name);
      opened.push(made);
      return made;
    };
    const start = async (scenario: Scenario): Promise<Harness> => {
      const harness = await build(scenario);
      opened.push(harness);
      return harness;
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
  });
}
