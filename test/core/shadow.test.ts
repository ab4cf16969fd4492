// Shadow mode (`enforce: false`). Hooks see the denials, callers see allowed, and
// Redis counts only what the policy granted. Also: what hooks are told, and that a failing hook
// never reaches the caller.
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import {
  createLimiter,
  type Decision,
  fixedWindow,
  type HookContext,
  RedisStore,
  type SluiceError,
} from '../../src/index.js';
import { CLIENT_KINDS, connect } from '../helpers/clients.js';
import { watchUnhandledRejections } from '../helpers/load.js';
import { startRedis } from '../helpers/redis-server.js';
import { fixedWindowCount } from '../helpers/stored.js';
import { clearOfWindowEnd } from '../helpers/window.js';

/** Collects process warnings while installed, instead of printing them. */
function watchWarnings(): { readonly seen: Error[]; dispose(): void } {
  const seen: Error[] = [];
  const saved = process.listeners('warning');
  process.removeAllListeners('warning');
  const listener = (warning: Error): void => {
    seen.push(warning);
  };
  process.on('warning', listener);
  return {
    seen,
    dispose: () => {
      process.off('warning', listener);
      for (const l of saved) process.on('warning', l);
    },
  };
}

describe('shadow mode and hooks', () => {
  // Each test counts to its limit in a 10-minute window, on a server it starts: the window must not end meanwhile.
  beforeEach(() => clearOfWindowEnd(600_000, 10_000));

  for (const kind of CLIENT_KINDS) {
    test(`${kind}: enforce false: callers are allowed, hooks see the denials, Redis counts the grants`, async () => {
      const server = await startRedis();
      const connected = await connect(kind, server.port);
      try {
        const store = new RedisStore({ client: connected.client });
        const hooked: Array<[Decision, HookContext]> = [];
        const limiter = createLimiter({
          store,
          policy: fixedWindow({ limit: 3, windowMs: 600_000 }),
          name: 'shadow',
          timeoutMs: 10_000,
          enforce: false,
          onDecision: (decision, context) => hooked.push([decision, context]),
        });
        const callers: Decision[] = [];
        for (let i = 0; i < 10; i++) callers.push(await limiter.limit('client', { cost: 1 }));

        assert.ok(callers.every((d) => d.allowed && d.retryAfterMs === 0));
        assert.deepEqual(
          callers.map((d) => d.wouldAllow),
          [true, true, true, false, false, false, false, false, false, false],
        );
        assert.deepEqual(
          hooked.map(([d]) => d.allowed),
          [true, true, true, false, false, false, false, false, false, false],
        );
        for (const [decision] of hooked.slice(3)) {
          assert.ok(decision.retryAfterMs > 0, 'the hook sees when the client could retry');
          assert.equal(decision.wouldAllow, undefined);
        }
        const { storeMs, ...context } = (hooked[0] as [Decision, HookContext])[1];
        assert.deepEqual(context, {
          name: 'shadow',
          identifier: 'client',
          operation: 'limit',
          cost: 1,
          source: 'store',
          enforced: false,
        });
        assert.ok(storeMs > 0, `the store's time is measured (${storeMs} ms)`);
        // Denials took nothing: Redis counted the three grants only.
        assert.equal(fixedWindowCount(await connected.command('GET', store.keyFor('shadow', 'client'))), 3);
      } finally {
        await connected.close();
        await server.stop();
      }
    });
  }

  test('enforce false with the deny cache and with the store down: still allowed, the verdict and reason kept', async () => {
    const server = await startRedis();
    const connected = await connect('ioredis', server.port);
    try {
      const store = new RedisStore({ client: connected.client });
      const hooked: Decision[] = [];
      const errors: Array<[SluiceError, HookContext]> = [];
      const limiter = createLimiter({
        store,
        policy: fixedWindow({ limit: 1, windowMs: 600_000 }),
        name: 'shadow-cache',
        timeoutMs: 10_000,
        enforce: false,
        denyCache: true,
        onStoreError: 'deny',
        onDecision: (decision) => hooked.push(decision),
        onError: (error, context) => errors.push([error, context]),
      });
      await limiter.limit('a');
      await limiter.limit('a');
      const calls = store.calls;
      const cached = await limiter.limit('a');
      assert.deepEqual([cached.allowed, cached.wouldAllow, cached.reason], [true, false, 'cached']);
      assert.deepEqual([hooked[2]?.allowed, hooked[2]?.reason], [false, 'cached']);
      assert.equal(store.calls, calls);

      await server.kill('SIGKILL');
      const down = await limiter.limit('b', { cost: 1 });
      assert.equal(down.allowed, true);
      assert.equal(down.wouldAllow, false);
      assert.ok(down.reason === 'store-error' || down.reason === 'timeout');
      assert.equal(hooked.at(-1)?.allowed, false);
      assert.equal(errors.length, 1);
      const source = errors[0]?.[1].source;
      assert.deepEqual(errors[0]?.[1], {
        name: 'shadow-cache',
        identifier: 'b',
        operation: 'limit',
        cost: 1,
        source,
        storeMs: 0,
        enforced: false,
      });
      assert.ok(source === 'store-error' || source === 'timeout');
      assert.ok(errors[0]?.[0].code === 'ERR_SLUICE_STORE' || errors[0]?.[0].code === 'ERR_SLUICE_TIMEOUT');
    } finally {
      await connected.close();
      await server.stop();
    }
  });

  test('decisions made without the store give hooks the error behind them', async () => {
    const server = await startRedis();
    const connected = await connect('node-redis', server.port);
    try {
      const contexts: HookContext[] = [];
      const limiter = createLimiter({
        store: new RedisStore({ client: connected.client }),
        policy: fixedWindow({ limit: 5, windowMs: 600_000 }),
        name: 'ctx',
        timeoutMs: 10_000,
        onStoreError: 'fallback',
        onDecision: (_decision, context) => contexts.push(context),
      });
      await limiter.limit('x');
      assert.equal(contexts[0]?.error, undefined);
      await server.kill('SIGKILL');
      const decisions = await Promise.all([limiter.limit('x'), limiter.limit('x'), limiter.peek('x')]);
      assert.deepEqual(
        decisions.map((d) => [d.reason, d.remaining]),
        [
          ['fallback', 4],
          ['fallback', 3],
          ['fallback', 3],
        ],
      );
      for (const context of contexts.slice(1)) {
        assert.equal(context.error?.code, 'ERR_SLUICE_STORE');
        assert.ok(context.error?.cause instanceof Error, 'the client error is the cause');
      }
    } finally {
      await connected.close();
      await server.stop();
    }
  });

  test('a hook that throws, or returns a rejected promise, changes no decision and warns once', async () => {
    const server = await startRedis();
    const connected = await connect('ioredis', server.port);
    const warnings = watchWarnings();
    const unhandled = watchUnhandledRejections();
    try {
      let thrown = 0;
      const throwing = (): void => {
        thrown++;
        throw new Error('metrics backend down');
      };
      const rejecting = async (): Promise<void> => {
        throw new Error('log shipper down');
      };
      const store = new RedisStore({ client: connected.client });
      const make = (name: string, onDecision: () => void, onError: () => void) =>
        createLimiter({
          store,
          policy: fixedWindow({ limit: 2, windowMs: 600_000 }),
          name,
          timeoutMs: 10_000,
          onStoreError: 'deny',
          onDecision,
          onError,
        });
      const sync = make('sync', throwing, throwing);
      const asynchronous = make('async', rejecting as () => void, rejecting as () => void);
      for (const limiter of [sync, asynchronous]) {
        const allowed = [];
        for (let i = 0; i < 4; i++) allowed.push((await limiter.limit('id')).allowed);
        assert.deepEqual(allowed, [true, true, false, false]);
      }
      await server.kill('SIGKILL');
      for (const limiter of [sync, asynchronous]) {
        const decision = await limiter.limit('id');
        assert.deepEqual(
          [decision.allowed, decision.reason === 'store-error' || decision.reason === 'timeout'],
          [false, true],
        );
      }
      await tick();
      await tick();
      // Four decisions, then a failure: onError and onDecision.
      assert.equal(thrown, 6);
      assert.deepEqual(unhandled.seen, []);
      // One warning per hook function, however often it failed.
      const hookWarnings = warnings.seen.filter(
        (w) => (w as Error & { code?: string }).code === 'SLUICE_HOOK_FAILED',
      );
      assert.equal(hookWarnings.length, 2);
      assert.match(hookWarnings[0]?.message ?? '', /metrics backend down/);
    } finally {
      warnings.dispose();
      unhandled.dispose();
      await connected.close();
      await server.stop();
    }
  });
});
