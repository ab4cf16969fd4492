// The rate-limit headers of one policy's decision, with the choice of styles made once per policy.
import { type HeaderStyle, STYLE_WRITERS } from '../http/header-styles.js';
import { type PolicyDecision, retryAfterSeconds } from '../http/header-values.js';
import { chosenStyles } from '../http/headers.js';
import { type Decision, isStoreFailure } from '../index.js';

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
 * two on many decisions.
 */
export function headerRenderer(
  name: string,
  windowMs: number,
  styles: readonly HeaderStyle[],
): (decision: Decision, nowMs: number) => RenderedHeaders {
  const writers = chosenStyles(styles).map((style) => STYLE_WRITERS[style]);
  return (decision, nowMs) => {
    const headers: Record<string, string> = {};
    const entries: PolicyDecision[] = [{ name, windowMs, decision }];
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
}
