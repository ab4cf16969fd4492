// Reads the state each algorithm keeps in Redis back into numbers. The formats are those written by
// src/algorithms/*.lua; the inspect tests round-trip them with the library, so a change there shows here.
import type { Policy } from 'sluice';
import { decodeFixedWindow, decodeGcra, MAX_PAUSE_MS, MAX_WAIT_MS } from 'sluice/internal';

/** What was read from Redis for one key. */
export type RawState =
  | { readonly type: 'none' }
  | { readonly type: 'string'; readonly value: string }
  | { readonly type: 'zset'; readonly entries: ReadonlyArray<{ member: string; scoreMs: number }> }
  | { readonly type: string };

export interface FixedWindowView {
  readonly format: 'fixed window: index × 2^21 + count, or "<window index>:<count>"';
  readonly windowIndex: number;
  readonly count: number;
  readonly windowStartMs: number;
  readonly windowEndMs: number;
  /** Whether the stored window is the one `now` falls in; a count from an earlier window is stale. */
  readonly current: boolean;
  /** Units used in the current window. */
  readonly used: number;
}

export interface SlidingWindowView {
  readonly format:
    | 'sliding window "<window index>:<previous count>:<current count>"'
    | 'sliding window, one integer: (window index mod 2^11) x 2^42 + previous count x 2^21 + current count';
  readonly windowIndex: number;
  readonly storedPrevious: number;
  readonly storedCurrent: number;
  /** The counts as of now (a stored window that has moved on becomes "previous", or is gone). */
  readonly previous: number;
  readonly current: number;
  /** Share of the previous window still inside the sliding window ending now. */
  readonly weight: number;
  /** previous x weight + current: what the next request is measured against. */
  readonly estimate: number;
}

export interface GcraView {
  readonly format: 'theoretical arrival time (TAT): minus (2^52 + whole µs), minus whole µs, or ms';
  readonly tatMs: number;
  /** How far the TAT is ahead of now: the time until the allowance is full again. */
  readonly aheadMs: number;
  readonly intervalMs: number;
  readonly toleranceMs: number;
  /** Units (tokens) in use now, fractions kept. */
  readonly used: number;
  /** Units (tokens) available now, fractions kept; negative while slots are scheduled ahead (wait()). */
  readonly available: number;
  /** While a pause an upstream asked for holds (throttle()): when it ends, in ms since the epoch. */
  readonly pausedUntilMs?: number;
}

export interface SlidingLogView {
  readonly format: 'sliding log: sorted set, one entry per unit, scored by time in ms';
  readonly entries: number;
  /** Entries still inside the window ending now. */
  readonly inWindow: number;
  readonly oldestMs: number | null;
  readonly newestMs: number | null;
  /** The entries' times, oldest first (at most 20). */
  readonly timesMs: readonly number[];
}

export interface ConcurrencyView {
  readonly format: 'leases: sorted set, one entry per slot held, scored by its expiry in ms; "#" scored minus the last fencing token';
  /** The last fencing token issued for the identifier (0 when none is recorded). */
  readonly lastToken: number;
  /** Slots held by live leases now. */
  readonly held: number;
  /** Slots whose lease lapsed, not yet freed by a call (the next one frees and counts them). */
  readonly lapsed: number;
  /** Live leases, each holding one slot or more. */
  readonly leases: number;
  /** When the next and the last live slot lapse, unless released or extended. */
  readonly nextExpiryMs: number | null;
  readonly lastExpiryMs: number | null;
}

export type StateView =
  | FixedWindowView
  | SlidingWindowView
  | GcraView
  | SlidingLogView
  | ConcurrencyView
  | { readonly error: string };

const round = (value: number, digits = 3): number => Number(value.toFixed(digits));

/** Clocks of app servers and Redis disagree a little; state a second ahead of its policy is not its own. */
const CLOCK_SLACK_MS = 1000;

/** A time for a message; Date cannot show one beyond ±8.64e15 ms, which odd state may hold. */
export function when(ms: number): string {
  return Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : `${ms} ms after 1970`;
}

function notThisPolicy(policy: Policy, found: string): { error: string } {
  return {
    error: `${found}, which ${policy.description} never writes: this is not its state (is the policy right?)`,
  };
}

/**
 * Decodes what a policy's script stored, as of `nowMs` on the server's clock. `ttlMs` (-1 for
 * none) helps tell state this policy never writes: a TAT the key outlived, a window yet to come.
 */
export function decodeState(policy: Policy, raw: RawState, nowMs: number, ttlMs = -1): StateView | null {
  if (raw.type === 'none') return null;
  const expected =
    policy.rule.name === 'sliding-log' || policy.rule.name === 'concurrency' ? 'zset' : 'string';
  if (raw.type !== expected) {
    return { error: `expected a ${expected} for ${policy.algorithm}, found a ${raw.type}` };
  }
  if ('entries' in raw && policy.rule.name === 'concurrency') return concurrencyView(raw.entries, nowMs);
  if ('entries' in raw) return slidingLogView(raw.entries, policy.rule.parameters[1], nowMs);
  const value = 'value' in raw ? raw.value : '';
  if (policy.rule.name === 'fixed-window') return fixedWindowView(policy, value, nowMs);
  if (policy.rule.name === 'sliding-window') return slidingWindowView(policy, value, nowMs);
  return gcraView(policy, value, nowMs, ttlMs);
}

function slidingLogView(
  entries: ReadonlyArray<{ scoreMs: number }>,
  windowMs: number,
  nowMs: number,
): SlidingLogView {
  const times = entries.map((entry) => entry.scoreMs);
  const newest = times.at(-1);
  // The log's own clock never runs backwards (see sliding-log.lua).
  const now = newest !== undefined && newest > nowMs ? newest : nowMs;
  return {
    format: 'sliding log: sorted set, one entry per unit, scored by time in ms',
    entries: times.length,
    inWindow: times.filter((time) => time > now - windowMs).length,
    oldestMs: times[0] ?? null,
    newestMs: newest ?? null,
    timesMs: times.slice(0, 20),
  };
}

/** The member that keeps the last fencing token (see concurrency.lua); every other member is a slot. */
const TOKEN_MEMBER = '#';

function concurrencyView(
  entries: ReadonlyArray<{ member: string; scoreMs: number }>,
  nowMs: number,
): ConcurrencyView {
  const slots = entries.filter((entry) => entry.member !== TOKEN_MEMBER);
  const live = slots.filter((entry) => entry.scoreMs > nowMs);
  // A lease's slots after its first are `<id>/<n>`.
  const leases = new Set(live.map((entry) => entry.member.split('/')[0]));
  const token = entries.find((entry) => entry.member === TOKEN_MEMBER);
  return {
    format:
      'leases: sorted set, one entry per slot held, scored by its expiry in ms; "#" scored minus the last fencing token',
    lastToken: token === undefined ? 0 : -token.scoreMs,
    held: live.length,
    lapsed: slots.length - live.length,
    leases: leases.size,
    nextExpiryMs: live[0]?.scoreMs ?? null,
    lastExpiryMs: live.at(-1)?.scoreMs ?? null,
  };
}

function fixedWindowView(policy: Policy, value: string, nowMs: number): FixedWindowView | { error: string } {
  const decoded = decodeFixedWindow(value);
  if (decoded === undefined) {
    return {
      error: `expected an integer (index × 2^21 + count) or "<window index>:<count>", found ${JSON.stringify(value)}`,
    };
  }
  const windowMs = policy.rule.parameters[1];
  const windowIndex = decoded.index;
  const count = decoded.count;
  if (windowIndex * windowMs > nowMs + CLOCK_SLACK_MS) {
    return notThisPolicy(
      policy,
      `a count for window ${windowIndex}, starting ${when(windowIndex * windowMs)}`,
    );
  }
  const current = windowIndex === Math.floor(nowMs / windowMs);
  return {
    format: 'fixed window: index × 2^21 + count, or "<window index>:<count>"',
    windowIndex,
    count,
    windowStartMs: windowIndex * windowMs,
    windowEndMs: (windowIndex + 1) * windowMs,
    current,
    used: current ? count : 0,
  };
}

/**
 * The integer form (sliding-window.lua): the window's index is kept modulo 2^11, so it is the latest
 * index at or before `index` (the window of now) with those low bits; the scripts write this form on
 * the server's clock only, and such a key expires by the end of the window after its own.
 */
function decodeSlidingWindow(
  value: string,
  index: number,
): { index: number; previous: number; current: number } | undefined {
  if (!/^\d+$/.test(value)) return undefined;
  const packed = Number(value);
  const turn = Math.floor(packed / 2 ** 42);
  const counts = packed - turn * 2 ** 42;
  const previous = Math.floor(counts / 2 ** 21);
  const back = (((index - turn) % 2048) + 2048) % 2048;
  return { index: index - back, previous, current: counts - previous * 2 ** 21 };
}

function slidingWindowView(
  policy: Policy,
  value: string,
  nowMs: number,
): SlidingWindowView | { error: string } {
  const windowMs = policy.rule.parameters[1];
  const index = Math.floor(nowMs / windowMs);
  const packed = decodeSlidingWindow(value, index);
  const match = /^(\d+):(\d+):(\d+)$/.exec(value);
  if (packed === undefined && match === null) {
    return {
      error: `expected an integer ((index mod 2^11) × 2^42 + previous × 2^21 + current) or "<window index>:<previous>:<current>", found ${JSON.stringify(value)}`,
    };
  }
  const windowIndex = packed?.index ?? Number(match?.[1]);
  const storedPrevious = packed?.previous ?? Number(match?.[2]);
  const storedCurrent = packed?.current ?? Number(match?.[3]);
  if (windowIndex * windowMs > nowMs + CLOCK_SLACK_MS) {
    return notThisPolicy(
      policy,
      `counts for window ${windowIndex}, starting ${when(windowIndex * windowMs)}`,
    );
  }
  const weight = (windowMs - (nowMs - index * windowMs)) / windowMs;
  // A stored window that has moved on by one becomes "previous"; further back, it is gone.
  const previous = windowIndex === index ? storedPrevious : windowIndex === index - 1 ? storedCurrent : 0;
  const current = windowIndex === index ? storedCurrent : 0;
  return {
    format:
      packed === undefined
        ? 'sliding window "<window index>:<previous count>:<current count>"'
        : 'sliding window, one integer: (window index mod 2^11) x 2^42 + previous count x 2^21 + current count',
    windowIndex,
    storedPrevious,
    storedCurrent,
    previous,
    current,
    weight: round(weight, 6),
    estimate: round(previous * weight + current),
  };
}

function gcraView(policy: Policy, value: string, nowMs: number, ttlMs: number): GcraView | { error: string } {
  const decoded = decodeGcra(value);
  const tat = decoded?.tat;
  if (decoded === undefined || tat === undefined || !Number.isFinite(tat)) {
    return {
      error: `expected a number (the TAT: minus (2^52 + whole µs), minus whole µs, or ms), found ${JSON.stringify(value)}`,
    };
  }
  const intervalMs = policy.rule.parameters[0];
  const toleranceMs = policy.rule.parameters[1];
  // The scripts never set a TAT further ahead of now than the tolerance, the longest wait of a
  // scheduled slot and the longest pause, and expire the key at the TAT (on the server's clock, at
  // the next whole second: graceMs).
  if (tat - nowMs > toleranceMs + MAX_WAIT_MS + MAX_PAUSE_MS + CLOCK_SLACK_MS) {
    return notThisPolicy(policy, `a TAT of ${when(tat)}, ${Math.round(tat - nowMs)} ms ahead`);
  }
  if (ttlMs >= 0 && nowMs - tat > CLOCK_SLACK_MS + decoded.graceMs) {
    return notThisPolicy(
      policy,
      `a TAT of ${when(tat)}, in the past on a key that still expires in ${ttlMs} ms`,
    );
  }
  const aheadMs = Math.max(0, tat - nowMs);
  return {
    format: 'theoretical arrival time (TAT): minus (2^52 + whole µs), minus whole µs, or ms',
    tatMs: tat,
    aheadMs: round(aheadMs),
    intervalMs,
    toleranceMs,
    used: round(aheadMs / intervalMs),
    available: round((toleranceMs - aheadMs) / intervalMs),
    ...(decoded.pausedUntil !== undefined && decoded.pausedUntil > nowMs
      ? { pausedUntilMs: decoded.pausedUntil }
      : {}),
  };
}
