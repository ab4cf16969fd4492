// What every adapter must do with a concurrency limiter: hold a slot while a request runs, free it when the
// response finishes or the client goes away, write the concurrent-requests headers, and renew long responses.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { afterEach, describe, it } from 'node:test';
import {
  all,
  concurrency,
  createLimiter,
  type Decision,
  fixedWindow,
  type HookContext,
  type Limiter,
  MemoryStore,
} from '../../../src/index.js';
import { clearOfWindowEnd } from '../window.js';
import type { Holder, LeaseApp, LeaseBuild, LeaseOptions } from './lease-apps.js';

/** Counts decisions of one operation as they are made, and waits for the n-th. */
export class DecisionCount {
  #count = 0;
  #waiting: Array<{ readonly n: number; readonly resolve: () => void }> = [];
  readonly at: number[] = [];

  constructor(readonly matches: (decision: Decision, context: HookContext) => boolean) {}

  hook = (decision: Decision, context: HookContext): void => {
    if (!this.matches(decision, context)) return;
    this.#count++;
    this.at.push(performance.now());
    for (const waiter of this.#waiting.filter((w) => w.n <= this.#count)) waiter.resolve();
    this.#waiting = this.#waiting.filter((w) => w.n > this.#count);
  };

  get count(): number {
    return this.#count;
  }

  /** Resolves once `n` matching decisions were made; rejects if they are not made within a minute (a defect, not a slow machine). */
  reach(n: number): Promise<void> {
    if (this.#count >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(
        () => reject(new Error(`${this.#count} of ${n} decisions made in a minute`)),
        60_000,
      );
      this.#waiting.push({
        n,
        resolve: () => {
          clearTimeout(deadline);
          resolve();
        },
      });
    });
  }
}

/** Requests held in the handler: each announces itself, and waits until let go. */
export class Holds implements Holder {
  readonly #entered = new Map<string, () => void>();
  readonly #enteredWaits = new Map<string, Promise<void>>();
  readonly #gates = new Map<string, () => void>();
  readonly #gated = new Map<string, Promise<void>>();

  entered(id: string): void {
    this.#waitFor(id);
    this.#entered.get(id)?.();
  }

  hold(id: string): Promise<void> {
    let gate = this.#gated.get(id);
    if (gate === undefined) {
      gate = new Promise<void>((resolve) => this.#gates.set(id, resolve));
      this.#gated.set(id, gate);
    }
    return gate;
  }

  /** Resolves once the handler runs for `id`. */
  reached(id: string): Promise<void> {
    return this.#waitFor(id);
  }

  /** Lets the handler for `id` answer. */
  letGo(id: string): void {
    this.hold(id);
    this.#gates.get(id)?.();
  }

  letAllGo(): void {
    for (const gate of this.#gates.values()) gate();
  }

  #waitFor(id: string): Promise<void> {
    let wait = this.#enteredWaits.get(id);
    if (wait === undefined) {
      wait = new Promise<void>((resolve) => this.#entered.set(id, resolve));
      this.#enteredWaits.set(id, wait);
    }
    return wait;
  }
}

export interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** A GET as client `x-client: c`, on a connection of its own; `abort` destroys it once the handler has it. */
export function get(
  url: string,
  path: string,
  abort?: Promise<void>,
): Promise<Reply> & { destroyed?: Promise<number> } {
  let onDestroyed: (at: number) => void = () => {};
  const destroyed = new Promise<number>((resolve) => {
    onDestroyed = resolve;
  });
  const reply = new Promise<Reply>((resolve, reject) => {
    const sent = request(`${url}${path}`, { headers: { 'x-client': 'c' }, agent: false }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        body += chunk;
      });
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
      );
    });
    sent.on('error', (error) =>
      abort === undefined ? reject(error) : resolve({ status: 0, headers: {}, body: '' }),
    );
    sent.end();
    abort?.then(() => {
      sent.destroy();
      onDestroyed(performance.now());
    });
  });
  return Object.assign(reply, { destroyed });
}

/** A concurrency limiter of 2 slots on a memory store whose leases outlast any test, with its releases counted. */
function slots(extra: Partial<{ leaseMs: number; name: string }> = {}): {
  readonly limiter: Limiter;
  readonly releases: DecisionCount;
  readonly extends: DecisionCount;
} {
  const releases = new DecisionCount(
    (decision, context) => context.operation === 'release' && decision.released === true,
  );
  const extensions = new DecisionCount(
    (decision, context) => context.operation === 'extend' && decision.extended === true,
  );
  const limiter = createLimiter({
    store: new MemoryStore(),
    policy: concurrency({ limit: 2, leaseMs: extra.leaseMs ?? 600_000 }),
    name: extra.name ?? 'conc',
    onDecision: (decision, context) => {
      releases.hook(decision, context);
      extensions.hook(decision, context);
    },
  });
  return { limiter, releases, extends: extensions };
}

/** The lease behaviour, run on one framework's app. */
export function leaseConformance(framework: string, build: LeaseBuild): void {
  describe(`${framework}: concurrency limits`, () => {
    const apps: LeaseApp[] = [];
    const holds: Holds[] = [];
    const open = async (options: LeaseOptions): Promise<{ app: LeaseApp; holds: Holds }> => {
      const held = new Holds();
      const app = await build(options, held);
      apps.push(app);
      holds.push(held);
      return { app, holds: held };
    };
    afterEach(async () => {
      for (const held of holds.splice(0)) held.letAllGo();
      for (const app of apps.splice(0)) await app.close();
    });

    it('a request holds its slot while it runs: past the limit, a 429 about concurrency with concurrent-requests headers', async () => {
      const { limiter, releases } = slots();
      const { app, holds: held } = await open({ limiter });
      const a = get(app.url, '/hold/a');
      const b = get(app.url, '/hold/b');
      await Promise.all([held.reached('a'), held.reached('b')]);
      const refused = await get(app.url, '/now');
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['ratelimit-policy'], '"conc";q=2;qu="concurrent-requests"');
      assert.equal(refused.headers.ratelimit, '"conc";r=0');
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      const problem = JSON.parse(refused.body) as { detail: string; 'violated-policies': string[] };
      assert.match(problem.detail, /^Too many concurrent requests for policy "conc" \(2 at once\)\./);
      assert.deepEqual(problem['violated-policies'], ['conc']);
      held.letGo('a');
      const finished = await a;
      assert.equal(finished.status, 200);
      assert.match(String(finished.headers.ratelimit), /^"conc";r=[01]$/);
      // The slot is free at the first acquisition after the release is seen.
      await releases.reach(1);
      assert.equal((await get(app.url, '/now')).status, 200);
      held.letGo('b');
      await b;
      await releases.reach(3);
      assert.equal((await limiter.peek('c')).remaining, 2);
    });

    it('a client that goes away frees its slot while the handler still runs, long before the lease would lapse', async () => {
      const { limiter, releases } = slots();
      const { app, holds: held } = await open({ limiter });
      const keep = get(app.url, '/hold/keep');
      await held.reached('keep');
      const gone = get(app.url, '/hold/gone', held.reached('gone'));
      const closedAt = await gone.destroyed;
      await releases.reach(1);
      // Released by the close alone: the handler for 'gone' has not answered, and the lease lasts 10 minutes.
      assert.equal((await limiter.peek('c')).remaining, 1);
      const freedAfterMs = (releases.at[0] as number) - (closedAt as number);
      assert.ok(freedAfterMs >= 0, 'the release follows the close');
      assert.equal((await get(app.url, '/now')).status, 200);
      held.letGo('keep');
      await keep;
    });

    it('beside a rate limit, in an array and in all(): refused by either, nothing is held; finished, the slot is freed and the rate kept', async () => {
      // The rate counts to its limit in a 10-minute window: it must not end meanwhile.
      await clearOfWindowEnd(600_000, 10_000);
      for (const combined of [false, true]) {
        const store = new MemoryStore();
        const releases = new DecisionCount((d, c) => c.operation === 'release' && d.released === true);
        const rate = createLimiter({
          store,
          policy: fixedWindow({ limit: 2, windowMs: 600_000 }),
          name: 'rate',
        });
        const conc = createLimiter({
          store,
          policy: concurrency({ limit: 1, leaseMs: 600_000 }),
          name: 'conc',
          onDecision: releases.hook,
        });
        const { app, holds: held } = await open({ limiter: combined ? all([rate, conc]) : [rate, conc] });
        const a = get(app.url, '/hold/a');
        await held.reached('a');
        const bySlots = await get(app.url, '/now');
        assert.equal(bySlots.status, 429);
        assert.match(JSON.parse(bySlots.body).detail, /^Too many concurrent requests for policy "conc"/);
        assert.equal(
          (await rate.peek('c')).remaining,
          1,
          'a request refused for lack of slots takes nothing from the rate',
        );
        held.letGo('a');
        await a;
        await releases.reach(1);
        assert.equal((await get(app.url, '/now')).status, 200);
        await releases.reach(2);
        const byRate = await get(app.url, '/now');
        assert.equal(byRate.status, 429);
        assert.match(JSON.parse(byRate.body).detail, /^Quota exceeded for policy "rate"/);
        assert.equal((await conc.peek('c')).remaining, 1, 'a request refused by the rate holds no slot');
        store.close();
      }
    });

    it('extendLeases renews a long response past leaseMs, and stops when it finishes', async () => {
      // A lease of 1 s renewed every 100 ms: a loaded machine that stalls for a while (200 ms was
      // seen) still renews in time; eleven renewals span more than the lease.
      const { limiter, releases, extends: extensions } = slots({ leaseMs: 1000 });
      const { app, holds: held } = await open({ limiter, extendLeases: 100 });
      const long = get(app.url, '/hold/long');
      await held.reached('long');
      // Each renewal is at least 100 ms after the last: eleven of them span more than the 1 s lease.
      await extensions.reach(11);
      assert.equal((await limiter.peek('c')).remaining, 1, 'the slot is still held');
      held.letGo('long');
      await long;
      await releases.reach(1);
      const renewed = extensions.count;
      await new Promise((resolve) => setTimeout(resolve, 150));
      assert.equal(extensions.count, renewed, 'no renewal after the response finished');
    });
  });
}
