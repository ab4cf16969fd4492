// `--envoy-headers`: the IETF RateLimit fields with an item per descriptor that has a limit, and a problem body when refused.
import { type PolicyDecision, PROBLEM_CONTENT_TYPE, problemDetails, rateLimitHeaders } from 'sluice/http';
import { wholeSeconds } from 'sluice/internal';
import type { HeaderValueMessage } from './messages.js';

/** One descriptor's part of the fields: its rule's name, its window, its decision, and its part in the answer. */
export interface HeaderItem {
  readonly name: string;
  readonly windowMs: number;
  readonly decision: PolicyDecision['decision'];
  /** Over its limit and enforced: shadowed descriptors and a global shadow never refuse. */
  readonly refusing: boolean;
  readonly quota: boolean;
}

/** What the fields add to the response: headers, and the body Envoy sends with a refusal. */
export interface HeaderAnswer {
  readonly headers: HeaderValueMessage[];
  /** An RFC 9457 problem naming the violated limits, for a refused request; undefined otherwise. */
  readonly body: Buffer | undefined;
}

/**
 * The fields for a request's descriptors. A descriptor that does not refuse the request is shown
 * as allowing (its numbers kept), so `Retry-After` and the problem come only from the refusing
 * ones. Refused by the quota rule alone (every quota-mode descriptor over), the request passes again
 * as soon as any of them has room: the soonest wait is the request's.
 */
export function headerAnswer(items: readonly HeaderItem[], requestOver: boolean): HeaderAnswer {
  const entries: PolicyDecision[] = items.map((item) => ({
    name: item.name,
    windowMs: item.windowMs,
    decision:
      requestOver && item.refusing ? item.decision : { ...item.decision, allowed: true, retryAfterMs: 0 },
  }));
  const fields = rateLimitHeaders(entries, { style: 'ietf' });
  if (!requestOver) return { headers: toHeaders(fields), body: undefined };
  const refusing = items.filter((item) => item.refusing);
  let problemEntries = entries;
  if (refusing.length > 0 && refusing.every((item) => item.quota)) {
    const soonestMs = Math.min(...refusing.map((item) => item.decision.retryAfterMs));
    fields['Retry-After'] = String(Math.max(1, wholeSeconds(soonestMs)));
    problemEntries = entries.map((entry) =>
      entry.decision.allowed ? entry : { ...entry, decision: { ...entry.decision, retryAfterMs: soonestMs } },
    );
  }
  const problem = problemDetails(problemEntries);
  if (problem === undefined) return { headers: toHeaders(fields), body: undefined };
  fields['Content-Type'] = PROBLEM_CONTENT_TYPE;
  return { headers: toHeaders(fields), body: Buffer.from(JSON.stringify(problem)) };
}

function toHeaders(fields: Record<string, string>): HeaderValueMessage[] {
  return Object.entries(fields).map(([key, value]) => ({ key, value }));
}
