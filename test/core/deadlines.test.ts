// The shared deadline queue holds about what is in flight: answered calls leave it as new ones come,
// not one timeoutMs later (with a long timeoutMs and a high call rate, they piled up by the million).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Deadlines } from '../../src/core/deadlines.js';

const never = (): Promise<never> => new Promise<never>(() => {});

describe('Deadlines', () => {
  test('answered calls are dropped as new calls arrive, long before their deadline', async () => {
    const deadlines = new Deadlines(60_000);
    let answered = 0;
    let expired = 0;
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 200; i++) {
        deadlines.race(
          () => Promise.resolve(i),
          () => answered++,
          () => assert.fail('no call fails'),
          () => expired++,
        );
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(answered, 10_000);
    assert.ok(deadlines.queued <= 200, `${deadlines.queued} entries held for 200 in flight`);
    assert.equal(deadlines.pending, 0);
    assert.equal(expired, 0);
  });

  test('a call still waiting keeps its place: it and those after it expire once, the answered ones never', async () => {
    const deadlines = new Deadlines(30);
    const outcomes: string[] = [];
    const start = (name: string, answer: boolean): void =>
      deadlines.race(
        answer ? () => Promise.resolve(name) : never,
        () => outcomes.push(`${name} answered`),
        () => outcomes.push(`${name} failed`),
        () => outcomes.push(`${name} expired`),
      );
    start('a', false);
    start('b', true);
    await new Promise((resolve) => setImmediate(resolve));
    start('c', false);
    start('d', true);
    await new Promise((resolve) => setImmediate(resolve));
    start('e', true);
    await new Promise((resolve) => setTimeout(resolve, 120));
    assert.deepEqual(outcomes.sort(), ['a expired', 'b answered', 'c expired', 'd answered', 'e answered']);
    assert.equal(deadlines.pending, 0);
    start('f', true);
    await new Promise((resolve) => setImmediate(resolve));
    start('g', true);
    assert.ok(deadlines.queued <= 2, `${deadlines.queued} entries held`);
  });
});
