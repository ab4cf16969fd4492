// A request's answer from its decision: one status per descriptor as the reference reports it, and the metrics.
import { isStoreFailure } from 'sluice';
import type { AppliedLimit } from './limiters.js';
import { CODE, type DescriptorStatusMessage } from './messages.js';
import type { DescriptorOutcome, EnvoyMetrics } from './metrics.js';
import type { DescriptorResult } from './request-decision.js';
import type { ResolvedDescriptor } from './slots.js';

export const MAX_UINT32 = 4_294_967_295;

/** The statuses, and what the store's answers say of its health. */
export interface Statuses {
  readonly statuses: DescriptorStatusMessage[];
  /** A rule that answers UNAVAILABLE met a store failure: the call is answered UNAVAILABLE. */
  readonly failed: boolean;
  /** At least one decision came from the store: it answers. */
  readonly answered: boolean;
}

/** Whether a descriptor's status is OVER_LIMIT: over its limit and not shadowed (a quota-mode one too). */
export function refuses(slot: ResolvedDescriptor, outcome: DescriptorResult): boolean {
  return outcome.over && !slot.shadow;
}

function statusOf(
  slot: ResolvedDescriptor,
  outcome: DescriptorResult,
  applied: AppliedLimit,
): DescriptorStatusMessage {
  const { decision } = outcome;
  return {
    code: refuses(slot, outcome) ? CODE.OVER_LIMIT : CODE.OK,
    current_limit: applied.currentLimit,
    limit_remaining: Math.min(decision.remaining, MAX_UINT32),
    duration_until_reset: {
      seconds: Math.floor(decision.resetMs / 1000),
      nanos: (decision.resetMs % 1000) * 1_000_000,
    },
  };
}

/**
 * What the metrics count for a descriptor: the units in use before it, from what remains after
 * it (its hits are in use only when they were taken: a refused request takes nothing).
 */
function outcomeOf(slot: ResolvedDescriptor, outcome: DescriptorResult): DescriptorOutcome {
  const { decision } = outcome;
  const before = decision.limit - decision.remaining - (outcome.taken ? slot.hits : 0);
  return {
    domain: slot.domain,
    statsParts: slot.statsParts,
    ruleParts: slot.rule?.parts ?? slot.statsParts,
    hits: slot.hits,
    limit: decision.limit,
    before: Math.max(0, before),
    over: outcome.over,
    shadow: slot.shadow,
  };
}

/** The status of an unlimited descriptor, and of one no limit applies to (shared: a status is never changed). */
const UNLIMITED: DescriptorStatusMessage = {
  code: CODE.OK,
  current_limit: null,
  limit_remaining: MAX_UINT32,
  duration_until_reset: null,
};
const NO_LIMIT: DescriptorStatusMessage = {
  code: CODE.OK,
  current_limit: null,
  limit_remaining: 0,
  duration_until_reset: null,
};

/** The statuses of every descriptor, in order; live ones take their outcome, in the order of `live`. */
export function statusesOf(
  slots: readonly ResolvedDescriptor[],
  live: readonly ResolvedDescriptor[],
  outcomes: readonly DescriptorResult[],
  metrics: EnvoyMetrics | undefined,
): Statuses {
  let failed = false;
  let answered = false;
  // The live descriptors are some of `slots`, in the same order.
  let next = 0;
  const statuses: DescriptorStatusMessage[] = new Array(slots.length);
  for (let i = 0; i < slots.length; i++) {
    const slot = slots[i] as ResolvedDescriptor;
    const outcome = live[next] === slot ? outcomes[next++] : undefined;
    if (slot.unlimited) {
      metrics?.unlimited({
        domain: slot.domain,
        statsParts: slot.statsParts,
        ruleParts: slot.rule?.parts ?? [],
        hits: slot.hits,
      });
      statuses[i] = UNLIMITED;
    } else if (outcome === undefined || slot.applied === undefined) {
      statuses[i] = NO_LIMIT;
    } else {
      const reason = outcome.decision.reason;
      if (isStoreFailure(reason)) failed ||= slot.applied.onStoreError === 'unavailable';
      else if ((reason === undefined || reason === 'denied') && slot.applied.limiter !== undefined)
        answered = true;
      metrics?.descriptor(outcomeOf(slot, outcome));
      statuses[i] = statusOf(slot, outcome, slot.applied);
    }
  }
  return { statuses, failed, answered };
}
