// The script registry generated from the .lua files: one script per algorithm file, bodies without
// comments, and every line of a body traceable to the line of its file.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { DECISION_SCRIPTS, LUA_FILES } from '../../src/stores/redis/lua.generated.js';
import { SCRIPTS, type ScriptKey, scriptLine } from '../../src/stores/redis/scripts.js';
import { ROOT } from '../helpers/paths.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const names = Object.keys(SCRIPTS) as ScriptKey[];

describe('the script registry', () => {
  test('every .lua file says what it is on its first line', () => {
    for (const file of Object.values(LUA_FILES)) {
      const first = readFileSync(join(ROOT, file), 'utf8').split('\n')[0] ?? '';
      assert.match(
        first,
        /^--! (prelude|algorithm|decision-helpers|decision-body|combined-body|script)\b/,
        file,
      );
    }
  });

  test("a decision function that is not its file's own runs in its file's script", () => {
    assert.equal(DECISION_SCRIPTS['budget-window-grant'], 'budget-window');
    assert.equal(DECISION_SCRIPTS['budget-bucket-lease'], 'budget-bucket');
    assert.equal(DECISION_SCRIPTS.gcra, 'gcra');
    assert.equal(names.includes('budget-window-grant' as ScriptKey), false);
  });

  test("bodies carry no comment, and each line of a body is its file's line, comments and indentation removed", () => {
    for (const name of names) {
      const lines = SCRIPTS[name].body.split('\n');
      lines.forEach((line, i) => {
        assert.doesNotMatch(line, /^\s*--/, `${name}:${i + 1}`);
        const from = scriptLine(name, i + 1);
        if (from === undefined) {
          // A line the generator wrote: the binding of a decision script, the combined dispatch table.
          assert.match(line, /^local (decide|ALGORITHMS)\b/, `${name}:${i + 1}`);
          return;
        }
        const original = readFileSync(join(ROOT, from.file), 'utf8').split('\n')[from.line - 1] ?? '';
        if (line === '')
          assert.match(original, /^\s*(--.*)?$/, `${name}:${i + 1} is ${from.file}:${from.line}`);
        else
          assert.ok(original.trimStart().startsWith(line), `${name}:${i + 1} is ${from.file}:${from.line}`);
      });
      assert.equal(scriptLine(name, lines.length + 1), undefined, name);
    }
  });
});

describe('a Lua error on the server', () => {
  let server: RedisServer;
  before(async () => {
    server = await startRedis();
  });
  after(async () => {
    await server.stop();
  });

  test('names a line of the script that scriptLine() maps to the line of the .lua file that raised it', async () => {
    const admin = new Redis({ port: server.port });
    try {
      // An operation the concurrency policy does not take: its function raises error().
      const reply = admin.call('EVAL', SCRIPTS.concurrency.body, '1', 'k', '9', '', '1', '1000', '1', '0');
      const message = await reply.then(
        () => '',
        (error: Error) => error.message,
      );
      const line = Number(/user_script:(\d+):/.exec(message)?.[1]);
      assert.ok(line > 0, message);
      const from = scriptLine('concurrency', line);
      assert.ok(from !== undefined, message);
      const source = readFileSync(join(ROOT, from.file), 'utf8').split('\n')[from.line - 1] ?? '';
      assert.match(source, /error\('sluice: concurrency\(\) has no operation/, `${from.file}:${from.line}`);
    } finally {
      admin.disconnect();
    }
  });
});
