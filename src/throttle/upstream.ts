// What an upstream's answer says about calling it again: a 429 or 503 with Retry-After, or rate-limit fields with nothing left.

/** An answer's status and header fields: a fetch `Response`, or what an HTTP client's error carries. */
export interface Answer {
  readonly status: number;
  header(name: string): string | undefined;
}

/** What an answer asks of the callers of its upstream. */
export interface UpstreamPause {
  /** How long not to call it, in ms. */
  readonly pauseMs: number;
  /** Whether the call itself was refused (429, 503) and may be tried again. */
  readonly refused: boolean;
}

/** A 429 that does not say how long to wait pauses this long: one second, then a paced retry. */
export const UNSAID_PAUSE_MS = 1000;

type HeaderBag = { get(name: string): string | null } | Record<string, unknown>;

function headerReader(headers: HeaderBag): (name: string) => string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const bag = headers as { get(name: string): string | null };
    return (name) => bag.get(name) ?? undefined;
  }
  // A plain object (axios, got): names as the client wrote them, usually lower case.
  const record = headers as Record<string, unknown>;
  return (name) => {
    const value = record[name.toLowerCase()] ?? record[name];
    if (Array.isArray(value)) return value.join(', ');
    return typeof value === 'string' || typeof value === 'number' ? String(value) : undefined;
  };
}

function answerFrom(value: unknown): Answer | undefined {
  const candidate = value as { status?: unknown; statusCode?: unknown; headers?: unknown } | null;
  if (typeof candidate !== 'object' || candidate === null) return undefined;
  const status = typeof candidate.status === 'number' ? candidate.status : candidate.statusCode;
  const headers = candidate.headers;
  if (typeof status !== 'number' || typeof headers !== 'object' || headers === null) return undefined;
  return { status, header: headerReader(headers as HeaderBag) };
}

/**
 * The upstream's answer in what a call returned or threw: a fetch `Response` (or anything with a
 * numeric `status` and `headers`), or an error whose `response` is one (axios, got, ky).
 */
export function answerOf(value: unknown): Answer | undefined {
  return answerFrom(value) ?? answerFrom((value as { response?: unknown } | null)?.response);
}

/** `Retry-After` as ms from now: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** A number in a structured field's parameter or a dictionary member (`r=0`, `reset=30`). */
function parameter(item: string, names: readonly string[]): number | undefined {
  for (const part of item.split(/[;,]/)) {
    const [key, raw] = part.split('=').map((s) => s.trim());
    if (key !== undefined && names.includes(key) && raw !== undefined && /^\d+$/.test(raw))
      return Number(raw);
  }
  return undefined;
}

/**
 * How long rate-limit fields say nothing is left, in ms: the IETF `RateLimit` list (`"api";r=0;t=30`,
 * one item per quota) or its `draft-7` form (`limit=100, remaining=0, reset=30`), `RateLimit-Remaining`
 * with `RateLimit-Reset` (seconds), or `X-RateLimit-Remaining` with `X-RateLimit-Reset` (Unix seconds, or
 * seconds from now when small).
 */
export function exhaustedForMs(answer: Answer, nowMs: number): number | undefined {
  const list = answer.header('ratelimit');
  if (list !== undefined) {
    if (/\bremaining=/.test(list)) {
      return parameter(list, ['remaining']) === 0 ? (parameter(list, ['reset']) ?? 0) * 1000 : undefined;
    }
    let longest: number | undefined;
    // Items are separated by commas; quota names are sf-strings, which sluice never writes with one.
    for (const item of list.split(',')) {
      if (parameter(item, ['r']) !== 0) continue;
      longest = Math.max(longest ?? 0, (parameter(item, ['t']) ?? 0) * 1000);
    }
    return longest;
  }
  if (answer.header('ratelimit-remaining')?.trim() === '0') {
    return Number(answer.header('ratelimit-reset') ?? 0) * 1000 || undefined;
  }
  if (answer.header('x-ratelimit-remaining')?.trim() === '0') {
    const reset = Number(answer.header('x-ratelimit-reset'));
    if (!Number.isFinite(reset) || reset <= 0) return undefined;
    // Unix seconds (GitHub's form); a small number is seconds from now, as some APIs send it.
    return reset > 1e9 ? Math.max(0, reset * 1000 - nowMs) : reset * 1000;
  }
  return undefined;
}

/**
 * What an answer asks: a 429 or 503 with `Retry-After` refuses the call and pauses for it (a 429
 * without one pauses {@link UNSAID_PAUSE_MS}, or what its rate-limit fields say); any answer whose
 * rate-limit fields say nothing is left pauses until they say it comes back. Undefined otherwise
 * (a 503 without `Retry-After` is an error, not a limit).
 */
export function pauseOf(answer: Answer, nowMs: number): UpstreamPause | undefined {
  const exhausted = exhaustedForMs(answer, nowMs);
  if (answer.status === 429 || answer.status === 503) {
    const retryAfter = retryAfterMs(answer.header('retry-after'), nowMs);
    const unsaid = answer.status === 429 ? (exhausted ?? UNSAID_PAUSE_MS) : undefined;
    const pauseMs = retryAfter ?? unsaid;
    return pauseMs === undefined ? undefined : { pauseMs, refused: true };
  }
  return exhausted === undefined || exhausted <= 0 ? undefined : { pauseMs: exhausted, refused: false };
}
