// The header styles, one writer each: IETF structured lists, express-rate-limit's draft-8 and draft-7, draft-6, legacy.
import {
  countsRequests,
  msUntilMore,
  type PolicyDecision,
  REGISTERED_UNITS,
  secondsUntilMore,
  sfString,
  tightest,
  wholeUnits,
  windowSeconds,
} from './header-values.js';

/**
 * Which header fields to write.
 * - `ietf`: `RateLimit-Policy` and `RateLimit` as structured-field lists, one item per policy named
 *   after the limiter (draft-ietf-httpapi-ratelimit-headers-09 and later).
 * - `draft-8`: the same two fields as express-rate-limit's `draft-8` writes them, each item named
 *   after its quota (`"100-in-1min"; r=99; t=60`).
 * - `draft-7`: `RateLimit: limit=100, remaining=99, reset=60` for the most constraining policy and
 *   `RateLimit-Policy: 100;w=60` listing every policy.
 * - `draft-6`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds from now).
 * - `legacy`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix seconds).
 *
 * `ietf`, `draft-8` and `draft-7` write the same two fields: choose one of them.
 */
export type HeaderStyle = 'ietf' | 'draft-8' | 'draft-7' | 'draft-6' | 'legacy';

export const HEADER_STYLES: readonly HeaderStyle[] = ['ietf', 'draft-8', 'draft-7', 'draft-6', 'legacy'];

/** The styles that write `RateLimit` and `RateLimit-Policy`; at most one per response. */
export const RATELIMIT_FIELD_STYLES: readonly HeaderStyle[] = ['ietf', 'draft-8', 'draft-7'];

/** Writes one style's fields for the visible policies (at least one, one entry per name). */
type StyleWriter = (
  headers: Record<string, string>,
  visible: readonly PolicyDecision[],
  nowMs: number,
) => void;

/** `;pk=:…:` (or `; pk=…` with `separator`) when the entry carries a partition key. */
function partitionParam(entry: PolicyDecision, separator: string): string {
  const bytes = entry.partitionKey;
  return bytes === undefined ? '' : `${separator}pk=:${Buffer.from(bytes).toString('base64')}:`;
}

/** Whether a style can describe a policy's unit: the item lists name registered units (`qu`), the others requests only. */
export function describesUnit(style: HeaderStyle, unit: string | undefined): boolean {
  if (unit === undefined || unit === 'requests') return true;
  return (style === 'ietf' || style === 'draft-8') && REGISTERED_UNITS.includes(unit);
}

/** `;qu="content-bytes"` (or `; qu=…` with `separator`) for a unit other than requests. */
function unitParam(entry: PolicyDecision, separator: string): string {
  return countsRequests(entry) ? '' : `${separator}qu=${sfString(entry.unit as string)}`;
}

/** express-rate-limit's draft-8 policy name: `100-in-1min`, `5-in-30sec`, `1000-in-1day`. */
export function quotaName(entry: PolicyDecision): string {
  const seconds = windowSeconds(entry);
  const [amount, unit] =
    seconds < 60
      ? [seconds, 'sec']
      : seconds < 3_600
        ? [seconds / 60, 'min']
        : seconds < 86_400
          ? [seconds / 3_600, 'hr']
          : [seconds / 86_400, 'day'];
  const plural = amount > 1 && (unit === 'hr' || unit === 'day') ? 's' : '';
  return `${wholeUnits(entry.decision.limit)}-in-${amount}${unit}${plural}`;
}

/** The IETF lists and draft-8: the same items, named and separated differently. */
function itemLists(name: (entry: PolicyDecision) => string, separator: string): StyleWriter {
  return (headers, visible) => {
    headers['RateLimit-Policy'] = visible
      .map((entry) => {
        const q = wholeUnits(entry.decision.limit);
        return `${sfString(name(entry))}${separator}q=${q}${unitParam(entry, separator)}${separator}w=${windowSeconds(entry)}${partitionParam(entry, separator)}`;
      })
      .join(', ');
    headers.RateLimit = visible
      .map((entry) => {
        const r = wholeUnits(entry.decision.remaining);
        const t = secondsUntilMore(entry.decision);
        return `${sfString(name(entry))}${separator}r=${r}${separator}t=${t}${partitionParam(entry, separator)}`;
      })
      .join(', ');
  };
}

/** One number per field, for the most constraining policy. */
function singleValues(
  write: (headers: Record<string, string>, entry: PolicyDecision, nowMs: number) => void,
): StyleWriter {
  return (headers, visible, nowMs) => write(headers, tightest(visible) as PolicyDecision, nowMs);
}

export const STYLE_WRITERS: Readonly<Record<HeaderStyle, StyleWriter>> = {
  ietf: itemLists((entry) => entry.name, ';'),
  'draft-8': itemLists(quotaName, '; '),
  'draft-7': (headers, visible) => {
    headers['RateLimit-Policy'] = visible
      .map((entry) => `${wholeUnits(entry.decision.limit)};w=${windowSeconds(entry)}`)
      .join(', ');
    const { decision } = tightest(visible) as PolicyDecision;
    headers.RateLimit = `limit=${wholeUnits(decision.limit)}, remaining=${wholeUnits(decision.remaining)}, reset=${secondsUntilMore(decision)}`;
  },
  'draft-6': singleValues((headers, { decision }) => {
    headers['RateLimit-Limit'] = String(wholeUnits(decision.limit));
    headers['RateLimit-Remaining'] = String(wholeUnits(decision.remaining));
    headers['RateLimit-Reset'] = String(secondsUntilMore(decision));
  }),
  legacy: singleValues((headers, { decision }, now) => {
    const nowMs = Number.isFinite(now) && now > 0 ? now : 0;
    const untilMs = Math.max(0, Number.isFinite(msUntilMore(decision)) ? msUntilMore(decision) : 0);
    headers['X-RateLimit-Limit'] = String(wholeUnits(decision.limit));
    headers['X-RateLimit-Remaining'] = String(wholeUnits(decision.remaining));
    headers['X-RateLimit-Reset'] = String(Math.ceil((nowMs + untilMs) / 1000));
  }),
};
