// The shedding experiment at small size over real HTTP: Express with `shed` in front of a service of 4 slots x 50 ms
// (halved at 3 s), loaded at 3x its capacity by an open-loop generator in another process; what the issue asks,
// asserted on counts and on the limit sampled every 100 ms, the p99 against the same service's unloaded p99.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ExperimentPlan, figures, runExperiment } from '../../bench/shed-experiment.js';
import { EXPERIMENT_SHEDDER } from './simulation.js';

const PLAN: ExperimentPlan = {
  slots: 4,
  serviceMs: 50,
  overload: 3,
  durationMs: 6000,
  halveAtMs: 3000,
  mix: [
    ['critical', 0.1],
    ['default', 0.5],
    ['sheddable', 0.4],
  ],
};

// Opt-in (SLUICE_SHED_EXPERIMENT=1): on a machine shared by many suites (load average 10-30 on 2 cores) the app
// and the generator cannot keep 240 requests a second moving, and latency is the machine's, not the service's.
const skip =
  process.env.SLUICE_SHED_EXPERIMENT === '1' ? false : 'set SLUICE_SHED_EXPERIMENT=1 on a quiet machine';

test('goodput, p99, critical served, sheddable refused first, 503s with Retry-After, the limit within 0.5x-2x of the slots and following their halving', {
  skip,
}, async () => {
  // The same service at 0.3x its capacity: its unloaded p99 on this machine, now.
  const quiet = { ...PLAN, overload: 0.3, durationMs: 2000, halveAtMs: 2000 };
  const unloaded = figures(await runExperiment('unloaded', quiet, EXPERIMENT_SHEDDER), quiet);
  const run = await runExperiment('shed', PLAN, EXPERIMENT_SHEDDER);
  const result = figures(run, PLAN);
  const sent = (PLAN.overload * PLAN.slots * PLAN.durationMs) / PLAN.serviceMs;
  assert.equal(run.answers.length, sent);
  assert.equal(result.otherFailures, 0);
  // Every refusal is a 503 with Retry-After.
  assert.equal(result.refusalsWithoutRetryAfter, 0);
  const capacityPerSecond =
    ((PLAN.slots * PLAN.halveAtMs + (PLAN.slots / 2) * (PLAN.durationMs - PLAN.halveAtMs)) /
      PLAN.durationMs) *
    (1000 / PLAN.serviceMs);
  assert.ok(
    result.goodputPerSecond >= 0.9 * capacityPerSecond,
    `goodput ${result.goodputPerSecond} of ${capacityPerSecond}`,
  );
  assert.ok(result.p99Ms <= 3 * unloaded.p99Ms, `p99 ${result.p99Ms}, unloaded ${unloaded.p99Ms}`);
  assert.ok(
    result.p99AfterHalvingMs <= 3 * unloaded.p99Ms,
    `p99 1.5 s after the halving ${result.p99AfterHalvingMs}, unloaded ${unloaded.p99Ms}`,
  );
  assert.ok(result.criticalServed >= 0.99, `critical served ${result.criticalServed}`);
  const refusals = Object.values(result.refused).reduce((sum, count) => sum + count, 0);
  assert.ok((result.refused.sheddable as number) > refusals / 2, JSON.stringify(result.refused));
  // Sampled every 100 ms, from the second half of each phase: between half and twice the slots.
  const limits = (fromMs: number, toMs: number) =>
    run.timeline.filter(([ms]) => ms >= fromMs && ms < toMs).map(([, limit]) => limit);
  for (const limit of limits(PLAN.halveAtMs / 2, PLAN.halveAtMs)) {
    assert.ok(limit >= PLAN.slots / 2 && limit <= 2 * PLAN.slots, `${limit} for ${PLAN.slots} slots`);
  }
  for (const limit of limits(PLAN.halveAtMs + (PLAN.durationMs - PLAN.halveAtMs) / 2, PLAN.durationMs)) {
    assert.ok(limit >= PLAN.slots / 4 && limit <= PLAN.slots, `${limit} for ${PLAN.slots / 2} slots`);
  }
});
