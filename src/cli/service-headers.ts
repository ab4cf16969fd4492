// The rate-limit headers of one policy's decision, with what never changes rendered once per policy.
import { type HeaderStyle, isEnforcedDenial, sfString, wholeSeconds, wholeUnits } from '../http/headers.js';
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
 * policy on every request of the service. The policy's quoted name and window are rendered once,
 * and `RateLimit-Policy` once per limit seen (a decision's limit is its policy's), instead of the
 * general function's filtering, grouping and ranking of several policies per request. A test
 * compares the two on many decisions.
 */
export function headerRenderer(
  name: string,
  windowMs: number,
  styles: readonly HeaderStyle[],
): (decision: Decision, nowMs: number) => RenderedHeaders {
  const ietf = styles.includes('ietf');
  const draft6 = styles.includes('draft-6');
  const legacy = styles.includes('legacy');
  const quoted = sfString(name);
  const windowPart = `;w=${Math.max(1, wholeSeconds(windowMs))}`;
  let policyLimit = Number.NaN;
  let policyHeader = '';
  return (decision, nowMs) => {
    const flat: string[] = [];
    // Shadow decisions and decisions made without the store have no numbers worth telling.
    const reportable = decision.wouldAllow === undefined && !isStoreFailure(decision.reason);
    const denied = isEnforcedDenial(decision);
    if (reportable) {
      const limit = wholeUnits(decision.limit);
      const remaining = wholeUnits(decision.remaining);
      const untilMoreMs = denied ? decision.retryAfterMs : decision.resetMs;
      const seconds = wholeSeconds(untilMoreMs);
      if (ietf) {
        if (limit !== policyLimit) {
          policyLimit = limit;
          policyHeader = `${quoted};q=${limit}${windowPart}`;
        }
        flat.push('RateLimit-Policy', policyHeader, 'RateLimit', `${quoted};r=${remaining};t=${seconds}`);
      }
      if (draft6) {
        flat.push('RateLimit-Limit', String(limit), 'RateLimit-Remaining', String(remaining));
        flat.push('RateLimit-Reset', String(seconds));
      }
      if (legacy) {
        const untilMs = Number.isFinite(untilMoreMs) ? Math.max(0, untilMoreMs) : 0;
        const now = Number.isFinite(nowMs) && nowMs > 0 ? nowMs : 0;
        flat.push('X-RateLimit-Limit', String(limit), 'X-RateLimit-Remaining', String(remaining));
        flat.push('X-RateLimit-Reset', String(Math.ceil((now + untilMs) / 1000)));
      }
    }
    if (denied) flat.push('Retry-After', String(Math.max(1, wholeSeconds(decision.retryAfterMs))));
    let json = '{';
    for (let i = 0; i < flat.length; i += 2) {
      json += `${i === 0 ? '' : ','}"${flat[i]}":${JSON.stringify(flat[i + 1])}`;
    }
    return { flat, json: `${json}}` };
  };
}
