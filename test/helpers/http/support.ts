// Shared by the HTTP suites: limiters on a fixed clock, a structured-field reader for the headers, problem checks.
import assert from 'node:assert/strict';
import { type BareItem, type Item, parseList } from 'structured-headers';
import type { RateLimitInfo } from '../../../src/http/info.js';
import { createLimiter, fixedWindow, type Limiter, MemoryStore, type Store } from '../../../src/index.js';
import type { BurstReply } from './burst.js';

/** A fixed clock 20 s before the end of a 60 s window: `t` and Retry-After come out as exactly 20. */
export const NOW = 1_000_000;
export const WINDOW_MS = 60_000;
export const SECONDS_LEFT = 20;

export interface TestLimiter {
  readonly limiter: Limiter;
  readonly store: Store;
  close(): void;
}

/**
 * A fixed-window limiter of `limit` per minute on a memory store, at {@link NOW} (or `clock`); with
 * `overrides`, reading what is stored for identifiers.
 */
export function memoryLimiter(
  limit: number,
  name = 'api',
  clock: () => number = () => NOW,
  overrides = false,
): TestLimiter {
  const store = new MemoryStore();
  const limiter = createLimiter({
    store,
    policy: fixedWindow({ limit, windowMs: WINDOW_MS }),
    name,
    clock,
    overrides,
  });
  return { limiter, store, close: () => store.close() };
}

/** Memory limiters made by one suite's tests, closed after each test with `closeAll`. */
export function limiterPool(): { limiterOf(limit: number, name?: string): Limiter; closeAll(): void } {
  const opened: TestLimiter[] = [];
  return {
    limiterOf(limit, name) {
      const made = memoryLimiter(limit, name);
      opened.push(made);
      return made.limiter;
    },
    closeAll() {
      for (const made of opened.splice(0)) made.close();
    },
  };
}

/** A clock tests move by hand: starts at {@link NOW}. */
export function testClock(): { readonly now: () => number; advance(ms: number): void } {
  let now = NOW;
  return {
    now: () => now,
    advance: (ms) => {
      now += ms;
    },
  };
}

/** The decision a handler read, as the test apps answer it on `/info`. */
export interface InfoSummary {
  readonly limit: number;
  readonly remaining: number;
  readonly resetMs: number;
  readonly key: string;
  readonly policies: readonly string[];
}

/** What the test apps send back from `/info`: typed as the adapters hand the decision to handlers. */
export function describeInfo(info: RateLimitInfo | undefined): string {
  if (info === undefined) return 'none';
  const summary: InfoSummary = {
    limit: info.limit,
    remaining: info.remaining,
    resetMs: info.resetMs,
    key: info.key,
    policies: info.policies.map((policy) => policy.name),
  };
  return JSON.stringify(summary);
}

/** A header read case-insensitively from whatever shape a client library returns. */
export type HeaderBag = Record<string, string | string[] | number | undefined>;

export function header(headers: HeaderBag, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name.toLowerCase() || value === undefined) continue;
    return Array.isArray(value) ? value.join(', ') : String(value);
  }
  return undefined;
}

function integerParam(item: Item, name: string): number {
  const value: BareItem | undefined = item[1].get(name);
  assert.equal(typeof value, 'number', `parameter ${name} is an sf-integer`);
  assert.ok(
    Number.isInteger(value) && (value as number) >= 0,
    `parameter ${name}=${String(value)} is a whole number ≥ 0`,
  );
  return value as number;
}

/**
 * Parses a RateLimit or RateLimit-Policy value as an RFC 8941 List (the parser throws on bad
 * syntax) and returns each item's name and parameters. Each member must be an Item whose value is
 * a String (the policy name), with integer parameters; `qu`, the quota unit, a String, is `qu`.
 */
export function parseItems(
  value: string | undefined,
): Array<{ name: string; params: Record<string, number>; qu?: string }> {
  assert.ok(value !== undefined, 'the field is present');
  const list = parseList(value);
  assert.ok(list.length > 0, 'the list is not empty');
  return list.map((member) => {
    assert.ok(!Array.isArray(member[0]), 'a member is an Item, not an Inner List');
    const item = member as Item;
    assert.equal(typeof item[0], 'string', 'the item is an sf-string naming the policy');
    const params: Record<string, number> = {};
    for (const key of item[1].keys()) if (key !== 'qu') params[key] = integerParam(item, key);
    const qu = item[1].get('qu');
    if (qu === undefined) return { name: item[0] as string, params };
    assert.equal(typeof qu, 'string', 'qu is an sf-string');
    return { name: item[0] as string, params, qu: qu as string };
  });
}

/** The RateLimit item of one policy, parsed; fails unless exactly one item has that name. */
export function rateLimitItem(headers: HeaderBag, name: string): { r: number; t: number } {
  const items = parseItems(header(headers, 'ratelimit')).filter((item) => item.name === name);
  assert.equal(items.length, 1, `one RateLimit item for ${name}`);
  const { r, t } = items[0]?.params ?? {};
  assert.ok(r !== undefined && t !== undefined, 'r and t are present');
  return { r, t };
}

/** The RateLimit-Policy item of one policy, parsed. */
export function policyItem(headers: HeaderBag, name: string): { q: number; w: number } {
  const items = parseItems(header(headers, 'ratelimit-policy')).filter((item) => item.name === name);
  assert.equal(items.length, 1, `one RateLimit-Policy item for ${name}`);
  const { q, w } = items[0]?.params ?? {};
  assert.ok(q !== undefined && w !== undefined && w >= 1, 'q and w are present, w at least 1');
  return { q, w };
}

/** Checks a 429's problem+json body and returns it parsed. */
export function assertProblem(
  contentType: string | undefined,
  body: string,
  violated: readonly string[],
): void {
  assert.match(contentType ?? '', /^application\/problem\+json/);
  const problem = JSON.parse(body) as Record<string, unknown>;
  assert.equal(problem.type, 'https://iana.org/assignments/http-problem-types#quota-exceeded');
  assert.equal(problem.title, 'Too Many Requests');
  assert.equal(problem.status, 429);
  assert.equal(typeof problem.detail, 'string');
  assert.match(problem.detail as string, /Retry in \d+ s/);
  assert.deepEqual(problem['violated-policies'], violated);
}

/** Waits for pending microtasks and one macrotask turn (refunds run after the response is finished). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Replies to a burst against one policy of `limit` that began full, whose handler answers the
 * decision's `remaining`: exactly `limit` allowed, each with its own count (`limit - 1` down to 0,
 * once each) in the RateLimit item and in the body, and every other one a 429 with Retry-After
 * and the problem body.
 */
export function assertExactBurst(replies: readonly BurstReply[], policy: string, limit: number): void {
  const allowed = replies.filter((reply) => reply.status === 200);
  const refused = replies.filter((reply) => reply.status === 429);
  assert.deepEqual([allowed.length, refused.length], [limit, replies.length - limit], 'statuses: 200s, 429s');
  const remaining = allowed.map((reply) => rateLimitItem(reply.headers, policy).r).sort((a, b) => a - b);
  assert.deepEqual(
    remaining,
    Array.from({ length: limit }, (_, i) => i),
    'each allowed request saw its own count',
  );
  assert.deepEqual(
    allowed.map((reply) => Number(reply.body)).sort((a, b) => a - b),
    remaining,
    'the handler read the same decision',
  );
  for (const reply of refused) {
    assert.ok(Number(header(reply.headers, 'retry-after')) >= 1);
    assert.equal(rateLimitItem(reply.headers, policy).r, 0);
    assertProblem(header(reply.headers, 'content-type'), reply.body, [policy]);
  }
}
