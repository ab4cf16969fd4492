// The rate-limit headers of one policy's decision, with the choice of styles made once per policy.

import { type Decision, isStoreFailure } from 'sluice';
import { type HeaderStyle, type PolicyDecision, retryAfterSeconds } from 'sluice/http';
import {
  chosenStyles,
  describesUnit,
  STYLE_WRITERS,
  secondsUntilMore,
  sfString,
  wholeSeconds,
  wholeUnits,
} from 'sluice/internal';

/**
 * Header names and values, alternating, as `response.writeHead` takes them; `json` is the same
 * record as a JSON object's text, for the answer's `headers` member.
 */
export interface RenderedHeaders {
  readonly flat: string[];
  readonly json: string;
}

/**
 * Renders what `rateLimitHeaders([{ name, windowMs, decision }], { style })` returns, for one
 * policy on every request of the service, through the same style writers. What the general
 * function does per request for several policies (choosing the styles, grouping decisions by
 * name, ranking them) is done here once, or not at all: there is one policy. A test compares the
 * two on many decisions. A policy counted in a unit other than requests (`unit`) is written only in
 * the styles that can name it.
 */
export function headerRenderer(
  name: string,
  windowMs: number,
  styles: readonly HeaderStyle[],
  unit?: string,
  concurrent = false,
): (decision: Decision, nowMs: number) => RenderedHeaders {
  const chosen = chosenStyles(styles).filter((style) => describesUnit(style, unit));
  const writers = chosen.map((style) => STYLE_WRITERS[style]);
  const general = (decision: Decision, nowMs: number): RenderedHeaders => {
    const headers: Record<string, string> = {};
    const entries: PolicyDecision[] = [
      concurrent ? { name, windowMs, decision, unit, concurrent } : { name, windowMs, decision, unit },
    ];
    // Shadow decisions and decisions made without the store have no numbers worth telling.
    if (decision.wouldAllow === undefined && !isStoreFailure(decision.reason)) {
      for (const write of writers) write(headers, entries, nowMs);
    }
    const retryAfter = retryAfterSeconds(entries);
    if (retryAfter !== undefined) headers['Retry-After'] = String(retryAfter);
    const flat: string[] = [];
    let json = '{';
    for (const field in headers) {
      const value = headers[field] as string;
      flat.push(field, value);
      json += `${json === '{' ? '' : ','}"${field}":${JSON.stringify(value)}`;
    }
    return { flat, json: `${json}}` };
  };
  // A concurrency policy's items differ (no `w`, no `t`), and so do a unit's: their answers go the general way.
  const plain = !concurrent && (unit === undefined || unit === 'requests');
  if (chosen.length !== 1 || chosen[0] !== 'ietf' || !plain) return general;
  return ietfRenderer(name, windowMs, general);
}

/**
 * The default style alone, the service's usual case: the two IETF fields written straight from the
 * decision's numbers, with the policy's item name and `w` made once, and `RateLimit-Policy` kept
 * while the limit stays the same. Anything else (shadow mode, a failure policy's answer, a
 * refusal) goes the general way, which a test holds this one to.
 */
function ietfRenderer(
  name: string,
  windowMs: number,
  general: (decision: Decision, nowMs: number) => RenderedHeaders,
): (decision: Decision, nowMs: number) => RenderedHeaders {
  const item = sfString(name);
  // The item inside a JSON string: its quotes and backslashes escaped once more.
  const itemJson = JSON.stringify(item).slice(1, -1);
  const w = Math.max(1, wholeSeconds(windowMs));
  let policyLimit = Number.NaN;
  let policyValue = '';
  let policyJson = '';
  return (decision, nowMs) => {
    if (!decision.allowed || decision.wouldAllow !== undefined || decision.reason !== undefined) {
      return general(decision, nowMs);
    }
    if (decision.limit !== policyLimit) {
      policyLimit = decision.limit;
      const q = wholeUnits(policyLimit);
      policyValue = `${item};q=${q};w=${w}`;
      policyJson = `"RateLimit-Policy":"${itemJson};q=${q};w=${w}"`;
    }
    const rest = `;r=${wholeUnits(decision.remaining)};t=${secondsUntilMore(decision)}`;
    return {
      flat: ['RateLimit-Policy', policyValue, 'RateLimit', `${item}${rest}`],
      json: `{${policyJson},"RateLimit":"${itemJson}${rest}"}`,
    };
  };
}
