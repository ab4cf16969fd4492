// Decides a request's live descriptors: checks and impossible asks first, then the group under the quota rule.

import type { Decision } from 'sluice';
import { ERROR_CODES, SluiceError } from 'sluice';
import { callOptions, type DescriptorCall, type Together } from './decide.js';
import type { AppliedLimit } from './limiters.js';
import { decideUnderQuota, everyQuotaOver, type QuotaOutside } from './quota.js';
import type { ResolvedDescriptor } from './slots.js';

/** What the decision made of one live descriptor. */
export interface DescriptorResult {
  /** The store's decision (a look, when nothing was taken), or one made without it (a quota of 0). */
  readonly decision: Decision;
  /** Over its limit: its hits were refused (a check of 0 hits: nothing is left for one). */
  readonly over: boolean;
  /** Its hits were taken. */
  readonly taken: boolean;
}

/** The request's answer: one outcome per live descriptor, in order, and whether the request is over. */
export interface RequestDecision {
  readonly outcomes: readonly DescriptorResult[];
  readonly over: boolean;
}

/** How a request is decided: its group, its hash tag, and the quota-mode descriptors with no live limit. */
export interface DecideContext {
  readonly together: Together;
  readonly tag: string | undefined;
  /** Quota-mode descriptors (`--quota-mode`) that match no limit: they pass, as in the reference. */
  readonly quotaWithoutLimit: number;
}

/** A group member and the live descriptors it stands for (the same rule and entries twice are one member). */
interface Asking extends DescriptorCall {
  readonly slots: number[];
  readonly quota: boolean;
}

type Limiter = NonNullable<AppliedLimit['limiter']>;

/** Over without asking whether anything is left: a quota of 0, or more hits than the limit ever grants. */
function overWithoutAsking(slot: ResolvedDescriptor, hits: number): boolean {
  const applied = slot.applied as AppliedLimit;
  return applied.limiter === undefined || !Number.isSafeInteger(hits) || hits > applied.maxCost;
}

/** A refusal made without the store: a quota of 0, until the window ends as the reference reports it. */
function noQuota(applied: AppliedLimit): Decision {
  const resetMs = applied.windowMs - (Date.now() % applied.windowMs);
  return { allowed: false, limit: 0, remaining: 0, resetMs, retryAfterMs: resetMs };
}

/** Looks at a descriptor without taking: what is left now, and when it is full again. */
async function look(slot: ResolvedDescriptor, cost: number, tag: string | undefined): Promise<Decision> {
  const applied = slot.applied as AppliedLimit;
  const limiter = applied.limiter as Limiter;
  const member = { limiter, identifier: slot.identifier, cost, limit: applied.callLimit };
  return limiter.peek(slot.identifier, callOptions(member, tag));
}

/**
 * The members of the group: the live descriptors that take hits, enforced, within what the limit
 * can grant. Descriptors on one key ask for their hits together; when together they ask for more
 * than the limit grants, they are over without asking and are left to `statics`.
 */
function membersOf(live: readonly ResolvedDescriptor[], statics: Set<number>): Asking[] {
  const byKey = new Map<string, Asking>();
  live.forEach((slot, i) => {
    if (slot.shadow || slot.hits === 0 || statics.has(i) || charged(slot)) return;
    const applied = slot.applied as AppliedLimit;
    const limiter = applied.limiter as Limiter;
    const key = `${limiter.name}\n${slot.identifier}`;
    const asking = byKey.get(key);
    if (asking === undefined) {
      byKey.set(key, {
        limiter,
        identifier: slot.identifier,
        cost: slot.hits,
        limit: applied.callLimit,
        slots: [i],
        quota: slot.quota,
      });
    } else {
      byKey.set(key, {
        ...asking,
        cost: asking.cost + slot.hits,
        slots: [...asking.slots, i],
        quota: asking.quota && slot.quota,
      });
    }
  });
  const members: Asking[] = [];
  for (const asking of byKey.values()) {
    if (overWithoutAsking(live[asking.slots[0] as number] as ResolvedDescriptor, asking.cost)) {
      for (const i of asking.slots) statics.add(i);
    } else members.push(asking);
  }
  return members;
}

/** Counts the quota-mode descriptors decided outside the group; shadowed ones always pass. */
function quotaOutside(
  live: readonly ResolvedDescriptor[],
  outcomes: readonly (DescriptorResult | undefined)[],
  context: DecideContext,
): QuotaOutside {
  let over = 0;
  let passing = context.quotaWithoutLimit;
  live.forEach((slot, i) => {
    const outcome = outcomes[i];
    if (!slot.quota || outcome === undefined) return;
    if (slot.shadow || !outcome.over) passing++;
    else over++;
  });
  return { over, passing };
}

/** A check of 0 hits: over when nothing is left for one more hit; it takes nothing. */
async function checkOutcome(slot: ResolvedDescriptor, tag: string | undefined): Promise<DescriptorResult> {
  const applied = slot.applied as AppliedLimit;
  if (applied.limiter === undefined) return { decision: noQuota(applied), over: true, taken: false };
  const decision = await look(slot, 1, tag);
  return { decision, over: !decision.allowed, taken: false };
}

/**
 * Over without asking (more hits than the limit grants, or a quota of 0): refused, but what is left
 * and when it is full again are still the store's, so the status reports them exactly.
 */
async function staticOutcome(slot: ResolvedDescriptor, tag: string | undefined): Promise<DescriptorResult> {
  const applied = slot.applied as AppliedLimit;
  if (applied.limiter === undefined) return { decision: noQuota(applied), over: true, taken: false };
  // What a look reports as left is what is left now, whatever it asks for.
  const seen = await look(slot, 1, tag);
  // No wait makes these hits grantable: the soonest anything changes is the full allowance.
  return { decision: { ...seen, allowed: false, retryAfterMs: seen.resetMs }, over: true, taken: false };
}

/** A descriptor of a `charge_over_limit` rule with hits: the usage of a finished response, charged. */
function charged(slot: ResolvedDescriptor): boolean {
  return slot.hits > 0 && slot.applied?.chargeOverLimit === true && slot.applied.limiter !== undefined;
}

/**
 * Charges a descriptor's hits after the response: taken even past the limit (into debt, up to one
 * allowance), never over. A charge the store did not record is answered as the store's failure,
 * which the rule's `on_store_error` answers as it answers any.
 */
async function chargeOutcome(slot: ResolvedDescriptor, tag: string | undefined): Promise<DescriptorResult> {
  const applied = slot.applied as AppliedLimit;
  const limiter = applied.limiter as Limiter;
  const options = {
    ...(applied.callLimit === undefined ? {} : { limit: applied.callLimit }),
    ...(tag === undefined ? {} : { tag }),
  };
  try {
    return { decision: await limiter.charge(slot.identifier, slot.hits, options), over: false, taken: true };
  } catch (error) {
    if (
      !(error instanceof SluiceError) ||
      (error.code !== ERROR_CODES.STORE && error.code !== ERROR_CODES.TIMEOUT)
    ) {
      throw error;
    }
    const reason = error.code === ERROR_CODES.TIMEOUT ? 'timeout' : 'store-error';
    const limit = applied.callLimit ?? limiter.policy.limit;
    return {
      decision: { allowed: true, limit, remaining: 0, resetMs: 0, retryAfterMs: 0, reason },
      over: false,
      taken: false,
    };
  }
}

/** A shadowed descriptor decides alone: it takes when it allows, and never refuses the request. */
async function shadowOutcome(slot: ResolvedDescriptor, tag: string | undefined): Promise<DescriptorResult> {
  const applied = slot.applied as AppliedLimit;
  const limiter = applied.limiter as Limiter;
  const member = { limiter, identifier: slot.identifier, cost: slot.hits, limit: applied.callLimit };
  const decision = await limiter.limit(slot.identifier, callOptions(member, tag));
  return { decision, over: !decision.allowed, taken: decision.allowed };
}

/** The members looked at, not taken from: the request is over before the group is asked. */
async function lookAtMembers(
  members: readonly Asking[],
  tag: string | undefined,
  outcomes: (DescriptorResult | undefined)[],
): Promise<void> {
  await Promise.all(
    members.map(async (member) => {
      const decision = await member.limiter.peek(member.identifier, callOptions(member, tag));
      for (const i of member.slots) outcomes[i] = { decision, over: !decision.allowed, taken: false };
    }),
  );
}

/** The group decided under the quota rule; returns whether the request is over. */
async function decideMembers(
  members: readonly Asking[],
  outside: QuotaOutside,
  context: DecideContext,
  outcomes: (DescriptorResult | undefined)[],
): Promise<boolean> {
  const result = await decideUnderQuota(
    members,
    (member) => member.quota,
    outside,
    (group) => context.together.decide(group, context.tag),
  );
  members.forEach((member, k) => {
    const decision = result.decisions[k] as Decision;
    const taken = decision.allowed && !result.over;
    for (const i of member.slots) outcomes[i] = { decision, over: !decision.allowed, taken };
  });
  return result.over;
}

/** The most descriptors the usual path takes (it compares every pair for a shared key). */
const MAX_PLAIN = 8;

/**
 * The usual request's members, one per live descriptor: each enforced, in neither shadow nor quota
 * mode, taking hits within what its limit grants, on a key of its own. Undefined for any other.
 */
function plainMembers(live: readonly ResolvedDescriptor[]): DescriptorCall[] | undefined {
  const count = live.length;
  if (count === 0 || count > MAX_PLAIN) return undefined;
  const members: DescriptorCall[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const slot = live[i] as ResolvedDescriptor;
    if (slot.shadow || slot.quota || slot.hits === 0 || charged(slot) || overWithoutAsking(slot, slot.hits)) {
      return undefined;
    }
    const applied = slot.applied as AppliedLimit;
    const limiter = applied.limiter as Limiter;
    for (let j = 0; j < i; j++) {
      const other = members[j] as DescriptorCall;
      if (other.limiter === limiter && other.identifier === slot.identifier) return undefined;
    }
    members[i] = { limiter, identifier: slot.identifier, cost: slot.hits, limit: applied.callLimit };
  }
  return members;
}

/** The usual request's outcomes: over when any member refuses, and then nothing is taken. */
function plainOutcomes(decisions: readonly Decision[]): RequestDecision {
  let over = false;
  for (let i = 0; i < decisions.length; i++) if (!(decisions[i] as Decision).allowed) over = true;
  const outcomes: DescriptorResult[] = new Array(decisions.length);
  for (let i = 0; i < decisions.length; i++) {
    const decision = decisions[i] as Decision;
    outcomes[i] = { decision, over: !decision.allowed, taken: decision.allowed && !over };
  }
  return { outcomes, over };
}

/**
 * Decides a request's live descriptors. Nothing is taken from any descriptor of a refused request;
 * what a passing request takes is taken in one group (one atomic script on one shard). Shadowed
 * descriptors decide on their own (they never refuse). Checks of 0 hits and descriptors over
 * without asking are looked at first: they can make the request over before anything is taken.
 */
export function decideRequest(
  live: readonly ResolvedDescriptor[],
  context: DecideContext,
): Promise<RequestDecision> {
  const plain = plainMembers(live);
  // The usual request decided in one group, through no async frame of its own (see Together.decide).
  if (plain !== undefined) return context.together.decide(plain, context.tag).then(plainOutcomes);
  return decideEach(live, context);
}

/** Any other request: checks, charges, shadowed and statically refused descriptors, and the quota rule. */
async function decideEach(
  live: readonly ResolvedDescriptor[],
  context: DecideContext,
): Promise<RequestDecision> {
  const { tag } = context;
  const outcomes: (DescriptorResult | undefined)[] = new Array(live.length);
  const statics = new Set<number>();
  live.forEach((slot, i) => {
    if (slot.hits > 0 && !charged(slot) && overWithoutAsking(slot, slot.hits)) statics.add(i);
  });
  const members = membersOf(live, statics);
  const shadowed = Promise.all(
    live.map(async (slot, i) => {
      if (slot.shadow && slot.hits > 0 && !statics.has(i) && !charged(slot)) {
        outcomes[i] = await shadowOutcome(slot, tag);
      }
    }),
  );
  // Charges after the response are taken whatever the other descriptors say: the work was done.
  await Promise.all(
    live.map(async (slot, i) => {
      if (slot.hits === 0) outcomes[i] = await checkOutcome(slot, tag);
      else if (charged(slot)) outcomes[i] = await chargeOutcome(slot, tag);
      else if (statics.has(i)) outcomes[i] = await staticOutcome(slot, tag);
    }),
  );
  const ordinaryOver = live.some((slot, i) => !slot.shadow && !slot.quota && outcomes[i]?.over === true);
  const outside = quotaOutside(live, outcomes, context);
  const quotaMembers = members.some((member) => member.quota);
  let over: boolean;
  if (ordinaryOver || (!quotaMembers && everyQuotaOver(outside.over, outside.passing))) {
    over = true;
    await lookAtMembers(members, tag, outcomes);
  } else over = await decideMembers(members, outside, context, outcomes);
  await shadowed;
  return { outcomes: outcomes as DescriptorResult[], over };
}
