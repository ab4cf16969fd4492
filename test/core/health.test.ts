// Store health: an outage ends only on an answer to a call sent after it began, so a reply that was
// already on its way when another call failed cannot end it (and restart the fallback store's count).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { Call } from '../../src/core/call.js';
import { Fallback } from '../../src/core/fallback.js';
import { Health } from '../../src/core/health.js';
import { clearOfWindowEnd } from '../helpers/window.js';

const policy = fixedWindow({ limit: 2, windowMs: 600_000 });
const limitCall = (): Call => new Call('health', policy, 'limit', 'user-0', 1, undefined);

describe('Health', () => {
  test('a late answer to a call sent before the outage neither ends it nor resets the fallback', async () => {
    // The fallback counts in a clock-aligned window: its end must not fall between the grants counted here.
    await clearOfWindowEnd(600_000, 2_000);
    const changes: boolean[] = [];
    const health = new Health('fallback', new Fallback(), (up) => changes.push(up));
    const sentBefore = health.begun;
    health.failed(undefined, 'timeout', undefined, false);
    assert.equal(health.down, true);
    const sentDuring = health.begun;
    assert.ok(sentDuring > sentBefore);
    const granted = () => health.decide(limitCall(), 'timeout').allowed;
    assert.deepEqual([granted(), granted(), granted()], [true, true, false]);

    // The reply of a call sent before the failure arrives now.
    health.answered(undefined, sentBefore);
    assert.equal(health.down, true, 'an answer to a call sent before the outage does not end it');
    assert.equal(granted(), false, 'the fallback store keeps its count: no second allowance');

    // A call sent during the outage (the probe) is answered: the store is back.
    health.answered(undefined, sentDuring);
    assert.equal(health.down, false);
    assert.deepEqual(changes, [false, true]);

    // The next outage starts from a full allowance, and its own calls end it.
    health.failed(undefined, 'store-error', undefined, false);
    assert.deepEqual([granted(), granted(), granted()], [true, true, false]);
    health.answered(undefined, sentDuring);
    assert.equal(health.down, true, 'a call of the previous outage does not end this one');
    health.answered(undefined, health.begun);
    assert.equal(health.down, false);
  });
});
