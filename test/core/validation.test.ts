// Bad input: a SluiceError with a stable code and a message naming the option and the value, thrown at
// construction for configuration, rejected for calls, and nothing written to Redis either way.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createLimiter,
  ERROR_CODES,
  type ErrorCode,
  fixedWindow,
  gcra,
  MemoryStore,
  RedisStore,
  SluiceError,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js';
import { type Connected, connect } from '../helpers/clients.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

function expectError(run: () => unknown, code: string, ...fragments: Array<string | RegExp>): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof SluiceError, `a SluiceError, got ${String(error)}`);
    assert.equal(error.code, code);
    for (const fragment of fragments) {
      if (typeof fragment === 'string')
        assert.ok(error.message.includes(fragment), `"${error.message}" mentions ${fragment}`);
      else assert.match(error.message, fragment);
    }
    return true;
  });
}

async function expectRejection(
  promise: Promise<unknown>,
  code: string,
  ...fragments: string[]
): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof SluiceError, `a SluiceError, got ${String(error)}`);
    assert.equal(error.code, code);
    for (const fragment of fragments)
      assert.ok(error.message.includes(fragment), `"${error.message}" mentions ${fragment}`);
    return true;
  });
}

const INVALID = ERROR_CODES.INVALID_OPTION;

describe('bad configuration throws at construction', () => {
  const cases: Array<[string, () => unknown, string, ...string[]]> = [
    [
      'limit 0',
      () => fixedWindow({ limit: 0, windowMs: 1000 }),
      INVALID,
      '`fixedWindow.limit`',
      'got 0 (number)',
    ],
    [
      'limit NaN',
      () => slidingWindow({ limit: Number.NaN, windowMs: 1000 }),
      INVALID,
      '`slidingWindow.limit`',
      'NaN',
    ],
    [
      'non-integer limit',
      () => fixedWindow({ limit: 2.5, windowMs: 1000 }),
      INVALID,
      'positive integer',
      '2.5',
    ],
    [
      'limit as a string',
      () => gcra({ limit: '10' as unknown as number, periodMs: 1000 }),
      INVALID,
      '`gcra.limit`',
      '"10" (string',
    ],
    [
      'window below 1 ms',
      () => fixedWindow({ limit: 1, windowMs: 0.5 }),
      INVALID,
      '`fixedWindow.windowMs`',
      '0.5',
    ],
    ['negative window', () => slidingLog({ limit: 1, windowMs: -1 }), INVALID, '`slidingLog.windowMs`', '-1'],
    [
      'infinite period',
      () => gcra({ limit: 1, periodMs: Number.POSITIVE_INFINITY }),
      INVALID,
      '`gcra.periodMs`',
      'Infinity',
    ],
    ['burst 0', () => gcra({ limit: 1, periodMs: 1000, burst: 0 }), INVALID, '`gcra.burst`'],
    [
      'refill 0',
      () => tokenBucket({ capacity: 5, refillPerSecond: 0 }),
      INVALID,
      '`tokenBucket.refillPerSecond`',
      'greater than 0',
    ],
    [
      'capacity fractional',
      () => tokenBucket({ capacity: 1.5, refillPerSecond: 1 }),
      INVALID,
      '`tokenBucket.capacity`',
    ],
    [
      'a typo in an option',
      () => fixedWindow({ limit: 1, windowMS: 1000 } as never),
      INVALID,
      '`fixedWindow.windowMS`',
      '`windowMs`',
    ],
    ['no options at all', () => tokenBucket(undefined as never), INVALID, 'tokenBucket options'],
    [
      'sliding log above its ceiling',
      () => slidingLog({ limit: 1001, windowMs: 1000 }),
      ERROR_CODES.LIMIT_TOO_HIGH,
      'at most 1000',
      'slidingWindow',
      'gcra',
    ],
    [
      'missing store',
      () => createLimiter({ policy: gcra({ limit: 1, periodMs: 1 }), name: 'a' } as never),
      INVALID,
      '`store`',
      'undefined',
    ],
    [
      'missing policy',
      () => createLimiter({ store: new MemoryStore(), name: 'a' } as never),
      INVALID,
      '`policy`',
    ],
    [
      'missing name',
      () => createLimiter({ store: new MemoryStore(), policy: gcra({ limit: 1, periodMs: 1 }) } as never),
      INVALID,
      '`name`',
    ],
    [
      'a name with a brace',
      () =>
        createLimiter({ store: new MemoryStore(), policy: gcra({ limit: 1, periodMs: 1 }), name: 'a{b}' }),
      INVALID,
      '`name`',
      'braces',
    ],
    [
      'clock not a function',
      () =>
        createLimiter({
          store: new MemoryStore(),
          policy: gcra({ limit: 1, periodMs: 1 }),
          name: 'a',
          clock: 5 as never,
        }),
      INVALID,
      '`clock`',
    ],
    [
      'RedisStore without a client',
      () => new RedisStore({} as never),
      ERROR_CODES.UNSUPPORTED_CLIENT,
      '`RedisStore.client`',
    ],
    [
      'RedisStore with a wrong client',
      () => new RedisStore({ client: { get() {} } }),
      ERROR_CODES.UNSUPPORTED_CLIENT,
      'ioredis',
      'node-redis',
    ],
    ['MemoryStore maxKeys 0', () => new MemoryStore({ maxKeys: 0 }), INVALID, '`MemoryStore.maxKeys`'],
    [
      'MemoryStore prefix with a space',
      () => new MemoryStore({ prefix: 'a b' }),
      INVALID,
      '`MemoryStore.prefix`',
    ],
  ];
  for (const [title, run, code, ...fragments] of cases) {
    test(title, () => expectError(run, code, ...fragments));
  }
});

describe('bad calls reject and write nothing, on Redis and in memory', () => {
  let server: RedisServer;
  let connected: Connected;
  before(async () => {
    server = await startRedis();
    connected = await connect('ioredis', server.port);
  });
  after(async () => {
    await connected.close();
    await server.stop();
  });

  const badCalls: Array<
    [string, (l: ReturnType<typeof createLimiter>) => Promise<unknown>, string, ...string[]]
  > = [
    ['empty identifier', (l) => l.limit(''), ERROR_CODES.INVALID_IDENTIFIER, '`identifier`', '""'],
    ['numeric identifier', (l) => l.limit(42 as never), ERROR_CODES.INVALID_IDENTIFIER, '42 (number)'],
    ['undefined identifier', (l) => l.peek(undefined as never), ERROR_CODES.INVALID_IDENTIFIER, 'undefined'],
    ['object identifier', (l) => l.reset({} as never), ERROR_CODES.INVALID_IDENTIFIER],
    [
      'identifier over 1 KiB of UTF-8',
      (l) => l.limit('é'.repeat(513)),
      ERROR_CODES.INVALID_IDENTIFIER,
      '1024 bytes',
      '1026 bytes',
    ],
    ['cost 0', (l) => l.limit('id', { cost: 0 }), ERROR_CODES.INVALID_COST, '`cost`', '0 (number)'],
    ['negative cost', (l) => l.limit('id', { cost: -1 }), ERROR_CODES.INVALID_COST, '-1'],
    ['NaN cost', (l) => l.limit('id', { cost: Number.NaN }), ERROR_CODES.INVALID_COST, 'NaN'],
    [
      'infinite cost',
      (l) => l.peek('id', { cost: Number.POSITIVE_INFINITY }),
      ERROR_CODES.INVALID_COST,
      'Infinity',
    ],
    ['fractional cost', (l) => l.limit('id', { cost: 1.5 }), ERROR_CODES.INVALID_COST, '1.5'],
    ['cost as a string', (l) => l.limit('id', { cost: '2' as never }), ERROR_CODES.INVALID_COST, '"2"'],
    [
      'cost above what the policy can grant',
      (l) => l.limit('id', { cost: 11 }),
      ERROR_CODES.COST_EXCEEDS_LIMIT,
      'at most 10',
      '11',
    ],
    ['refund of 0', (l) => l.refund('id', 0), ERROR_CODES.INVALID_COST, '`amount`'],
    ['refund above the limit', (l) => l.refund('id', 1000), ERROR_CODES.COST_EXCEEDS_LIMIT, '`amount`'],
  ];

  for (const [title, call, code, ...fragments] of badCalls) {
    test(title, async () => {
      const redis = new RedisStore({ client: connected.client, prefix: 'bad' });
      const memory = new MemoryStore();
      for (const store of [redis, memory]) {
        const limiter = createLimiter({
          store,
          policy: tokenBucket({ capacity: 10, refillPerSecond: 1 }),
          name: 'v',
        });
        await expectRejection(call(limiter), code, ...fragments);
      }
      assert.equal(redis.calls, 0, 'no script call was sent');
      assert.equal(memory.size, 0, 'no memory state was written');
      assert.equal(Number(await connected.command('DBSIZE')), 0, 'nothing was written to Redis');
      memory.close();
    });
  }

  test('a clock that returns NaN or a negative time rejects with ERR_SLUICE_INVALID_CLOCK', async () => {
    for (const value of [Number.NaN, -5, Number.POSITIVE_INFINITY]) {
      const limiter = createLimiter({
        store: new RedisStore({ client: connected.client, prefix: 'clock' }),
        policy: fixedWindow({ limit: 5, windowMs: 1000 }),
        name: 'c',
        clock: () => value,
      });
      await expectRejection(limiter.limit('id'), ERROR_CODES.INVALID_CLOCK, '`clock`', String(value));
    }
    assert.equal(Number(await connected.command('DBSIZE')), 0);
  });

  test('every error code has its section in docs/errors.md, and every message ends pointing to it', async () => {
    const { readFile } = await import('node:fs/promises');
    const page = await readFile(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
    const headings = [...page.matchAll(/^## (\S+)$/gm)].map((match) => match[1]);
    const codes: string[] = Object.values(ERROR_CODES);
    assert.deepEqual(
      [...headings].sort(),
      [...codes].sort(),
      'one section per code, and none for an unknown code',
    );
    for (const code of codes) {
      // The heading's anchor is the code in lower case; the table links it and the messages point at it.
      const anchor = code.toLowerCase();
      assert.ok(page.includes(`[\`${code}\`](#${anchor})`), `${code} in the table, linked to its section`);
      const error = new SluiceError(code as ErrorCode, 'Something was wrong.');
      assert.equal(error.message, `Something was wrong. See sluice/docs/errors.md#${anchor}`);
      // The message shown in its section is the one sluice writes, pointer included.
      const section = page.slice(page.indexOf(`## ${code}\n`));
      assert.match(
        section.split('\n## ')[0] ?? '',
        new RegExp(`See sluice/docs/errors\\.md#${anchor}$`, 'm'),
      );
    }
    const readme = await readFile(new URL('../../../README.md', import.meta.url), 'utf8');
    assert.ok(readme.includes('(docs/errors.md)'), 'the README links the error codes page');
  });

  test('a message is ended as a sentence before its pointer, and pointed once however often it is wrapped', () => {
    const bare = new SluiceError(ERROR_CODES.STORE, 'Redis store failed: connection lost');
    assert.equal(
      bare.message,
      'Redis store failed: connection lost. See sluice/docs/errors.md#err_sluice_store',
    );
    const again = new SluiceError(ERROR_CODES.STORE, bare.message, { cause: bare });
    assert.equal(again.message, bare.message);
  });
});
