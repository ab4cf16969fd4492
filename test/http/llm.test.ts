// The LLM scenario against a real Redis: 300 concurrent requests from 4 processes through a proxy of a
// streaming upstream, 20 000 tokens per minute per user, an estimate of 100, usage 50 to 400 per answer.
// sluice's reserve and settle stay within the bound its docs state; counting the estimate alone, or
// charging afterwards with a charge refused past the limit, over-admit and lose what they served.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Scenario } from '../helpers/llm/scenario.js';
import { ESTIMATE, LIMIT } from '../helpers/llm/shared.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const PROCESSES = 4;
const PER_PROCESS = 75;

describe('LLM tokens per user: 300 concurrent streamed answers, charged after they finish', () => {
  let server: RedisServer;
  let scenario: Scenario;
  before(async () => {
    server = await startRedis();
    scenario = await Scenario.start(server.port, PROCESSES, 20);
  });
  after(async () => {
    await scenario.close();
    await server.stop();
  });

  test('reserve and settle: the tokens served pass the limit by at most the excess of the requests in flight at the last admission, and all are counted', async (t) => {
    const figures = await scenario.run('settle', PER_PROCESS);
    t.diagnostic(JSON.stringify({ ...figures, name: undefined, t0: undefined }));
    assert.equal(figures.admitted + figures.refused, PROCESSES * PER_PROCESS);
    const overshoot = figures.served - LIMIT;
    const excess = figures.excessInFlight as number;
    assert.ok(
      overshoot <= excess,
      `served ${figures.served}: ${overshoot} over the limit, beyond the bound ${excess}`,
    );
    // Every token served is counted, but for what maxDebt cut off (and reported).
    assert.equal(figures.counted + figures.cutOff, figures.served);
    assert.ok(figures.counted <= 2 * LIMIT, 'the debt is at most one allowance');
    // In debt, the user is refused until the debt is paid: exactly until then, by the bucket's refill.
    const owed = figures.counted - LIMIT;
    assert.ok(owed > 0, `the run went into debt (counted ${figures.counted})`);
    const intervalMs = 60_000 / LIMIT;
    assert.equal(figures.waitMs, Math.ceil((owed + ESTIMATE) * intervalMs - 1e-3));
    const { name, t0 } = figures;
    assert.equal((await scenario.peekAt(name, t0 + figures.waitMs - 1, ESTIMATE)).allowed, false);
    assert.equal((await scenario.peekAt(name, t0 + figures.waitMs, ESTIMATE)).allowed, true);
  });

  test('the estimate alone: the tokens served pass the limit, and the limiter knows only the estimates', async (t) => {
    const figures = await scenario.run('estimate', PER_PROCESS);
    t.diagnostic(JSON.stringify({ ...figures, name: undefined, t0: undefined }));
    assert.equal(figures.admitted, LIMIT / ESTIMATE);
    assert.equal(figures.counted, LIMIT);
    assert.ok(figures.served > LIMIT, `served ${figures.served}`);
    // The next request waits for one estimate's refill, as if nothing more had been served.
    assert.equal(figures.waitMs, Math.ceil((ESTIMATE * 60_000) / LIMIT - 1e-3));
  });

  test('a charge after the response refused past the limit: more served than the limit, and what did not fit dropped', async (t) => {
    const figures = await scenario.run('charge-only', PER_PROCESS);
    t.diagnostic(JSON.stringify({ ...figures, name: undefined, t0: undefined }));
    assert.ok(figures.served > LIMIT, `served ${figures.served}`);
    assert.ok(figures.counted <= LIMIT);
    assert.equal(figures.counted + figures.dropped, figures.served);
    assert.ok(figures.dropped > 0);
  });
});
