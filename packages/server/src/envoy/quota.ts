// The quota rule: a request is over when an ordinary descriptor is, or when every quota-mode descriptor is.
import type { Decision } from 'sluice';

/** A request's quota-mode descriptors decided outside the group (checks of 0 hits, shadowed, quota of 0). */
export interface QuotaOutside {
  /** How many are over. */
  readonly over: number;
  /** How many pass (a shadowed one always does). */
  readonly passing: number;
}

/** Whether the quota rule alone makes the request over: there are quota-mode descriptors, and none passes. */
export function everyQuotaOver(over: number, passing: number): boolean {
  return over > 0 && passing === 0;
}

/**
 * Decides a request's members under the quota rule, taking what a passing request takes in one
 * group (`decideTogether`, atomic on one shard: it takes from every member or from none).
 *
 * The group is asked with every member. When it refuses, an ordinary member's refusal makes the
 * request over; otherwise the quota-mode members that refused are set aside (over, nothing taken
 * from them) and the group is asked again without them, until it grants or no quota-mode
 * descriptor is left passing. So a passing request takes from its ordinary members and from every
 * quota-mode member that allows, a refused one takes nothing, and a request asks the store at most
 * once more than it has quota-mode members (once, when nothing is over).
 *
 * The caller decides first whether the request is over before asking (an ordinary descriptor over
 * its quota of 0; every quota-mode descriptor over outside the group while none is a member).
 */
export async function decideUnderQuota<M>(
  members: readonly M[],
  isQuota: (member: M) => boolean,
  outside: QuotaOutside,
  decideTogether: (members: readonly M[]) => Promise<readonly Decision[]>,
): Promise<{ readonly decisions: readonly Decision[]; readonly over: boolean }> {
  const decisions: Decision[] = new Array(members.length);
  let active = members.map((_, i) => i);
  let quotaOver = outside.over;
  while (active.length > 0) {
    const round = await decideTogether(active.map((i) => members[i] as M));
    const refused: number[] = [];
    active.forEach((i, k) => {
      const decision = round[k] as Decision;
      decisions[i] = decision;
      if (!decision.allowed) refused.push(i);
    });
    if (refused.length === 0) return { decisions, over: false };
    if (refused.some((i) => !isQuota(members[i] as M))) return { decisions, over: true };
    quotaOver += refused.length;
    active = active.filter((i) => !refused.includes(i));
    const quotaLeft = active.some((i) => isQuota(members[i] as M));
    if (!quotaLeft && everyQuotaOver(quotaOver, outside.passing)) return { decisions, over: true };
  }
  return { decisions, over: false };
}
