// A region's part of a global window budget: the pure twin of budget-window.lua (the decision, and the grant the worker writes).
import type { Operation, Outcome, Policy } from '../types.js';

/**
 * What a region keeps per identifier: the window its counts belong to, the units admitted in it, the
 * units the ledger granted this region for it (its floor included), and what it granted for the next
 * window (claimed ahead, 0 when not yet); for a sliding window, also the units admitted in the window
 * before (`previous`, 0 for a fixed one). Windows are clock-aligned, counted by the caller's clock.
 */
export interface BudgetWindowState {
  index: number;
  count: number;
  grant: number;
  next: number;
  previous: number;
}

/**
 * A sliding budget's policies carry their window as a negative number (`-windowMs`): the scripts
 * take two parameters per policy, and the sign is the one place left for the kind.
 */
function windowParameter(windowMs: number, sliding: boolean): number {
  return sliding ? -windowMs : windowMs;
}

/**
 * What a region has used of its grant at `now`, times the window: `count × W` for a fixed window;
 * for a sliding one, `count × W + previous × (W − elapsed)`, the region's own sliding estimate (see
 * docs/regions.md: each region keeping its estimate within its grant is what lets the regions'
 * grants of one window add up to the limit). Integers times W, so that the twin and the script agree.
 */
function usedTimesWindow(
  rolled: Rolled,
  index: number,
  now: number,
  windowMs: number,
  sliding: boolean,
): number {
  if (!sliding || rolled.previous === 0) return rolled.count * windowMs;
  const left = (index + 1) * windowMs - now;
  return rolled.count * windowMs + rolled.previous * Math.max(left, 0);
}

/** The counts of the window `index`, rolled forward from what was stored (see {@link BudgetWindowState}). */
interface Rolled {
  count: number;
  grant: number;
  next: number;
  /** The units admitted in the window before (a sliding window's weight). */
  previous: number;
  /** The stored state already held this window. */
  current: boolean;
}

function roll(stored: BudgetWindowState | undefined, index: number, floor: number): Rolled {
  if (stored !== undefined && stored.index === index) {
    const { count, grant, next, previous } = stored;
    return { count, grant, next, previous, current: true };
  }
  // The grant claimed ahead for this window becomes its grant; the floor is granted in every window.
  const before = stored !== undefined && stored.index === index - 1;
  const claimed = before ? stored.next : 0;
  const previous = before ? stored.count : 0;
  return { count: 0, grant: Math.max(floor, claimed), next: 0, previous, current: false };
}

/**
 * A state lives to the end of the window after its own (a grant may wait there). Past that, a state
 * reads as none at all, so a state Redis has yet to expire decides as the memory store's none does.
 */
function keepFor(index: number, windowMs: number, now: number): number {
  return Math.ceil((index + 2) * windowMs - now);
}

/**
 * One of the worker's writes to the region's store (grant, sync, release): `amount` for window
 * `target`, answered as `remaining` and `resetMs` (see each).
 */
type WorkerWrite = (
  stored: BudgetWindowState | undefined,
  now: number,
  amount: number,
  target: number,
  windowMs: number,
  sliding?: boolean,
) => Outcome<BudgetWindowState>;

/**
 * The state as the worker's writes (grant, release, sync) find it: rolled to the window `now` falls
 * in, or to a later one the state already holds (another process of the region, whose clock is
 * ahead, moved it on), with no floor (a write names the grant it means, floor included).
 */
function rolledAt(
  stored: BudgetWindowState | undefined,
  now: number,
  windowMs: number,
): { index: number; rolled: Rolled } {
  const clockIndex = Math.floor(now / windowMs);
  const index = stored !== undefined && stored.index > clockIndex ? stored.index : clockIndex;
  return { index, rolled: roll(stored, index, 0) };
}

/** A grant, sync or release answered: `remaining` and `resetMs` carry its figures; no state written without a new one. */
function answered(
  remaining: number,
  grant: number,
  state: BudgetWindowState | undefined,
  ttlMs: number,
): Outcome<BudgetWindowState> {
  return { allowed: true, remaining, resetMs: grant, retryAfterMs: 0, state, ttlMs };
}

/** A worker's write that changed the rolled counts: written back, answering `remaining` and the grant. */
function rewritten(
  stored: BudgetWindowState | undefined,
  index: number,
  rolled: Rolled,
  remaining: number,
  windowMs: number,
  now: number,
  sliding: boolean,
): Outcome<BudgetWindowState> {
  return answered(
    remaining,
    rolled.grant,
    written(stored, index, rolled, sliding),
    keepFor(index, windowMs, now),
  );
}

function written(
  stored: BudgetWindowState | undefined,
  index: number,
  rolled: Rolled,
  sliding: boolean,
): BudgetWindowState {
  // A fixed window keeps no previous count (its state is the four numbers it always was).
  const previous = sliding ? rolled.previous : 0;
  if (stored === undefined) {
    return { index, count: rolled.count, grant: rolled.grant, next: rolled.next, previous };
  }
  stored.index = index;
  stored.count = rolled.count;
  stored.grant = rolled.grant;
  stored.next = rolled.next;
  stored.previous = previous;
  return stored;
}

/**
 * Decides one request of a region against the grant it holds for the window `now` falls in:
 * `count + cost <= grant`; for a sliding window, `previous × (1 − elapsed) + count + cost <= grant`. A state already in a later window (another process of the region, whose
 * clock is ahead, moved it on) admits nothing for this one: its counts are gone, so admitting again
 * could pass the grant. A denial in a window the state has not reached yet writes that window, so that a
 * grant arriving later finds it (a grant that finds nothing treats the window's grant as used).
 */
export function decideBudgetWindow(
  stored: BudgetWindowState | undefined,
  now: number,
  operation: Operation,
  cost: number,
  floor: number,
  windowMs: number,
  sliding = false,
  floorOff = false,
): Outcome<BudgetWindowState> {
  const index = Math.floor(now / windowMs);
  const untilEnd = Math.ceil((index + 1) * windowMs - now);
  if (stored !== undefined && stored.index > index) {
    const refund = operation === 'refund';
    const wait = Math.ceil(stored.index * windowMs - now);
    return {
      allowed: refund,
      remaining: 0,
      resetMs: untilEnd,
      retryAfterMs: refund ? 0 : wait,
      state: stored,
      ttlMs: -1,
    };
  }
  const rolled = roll(stored, index, floor);
  // Grants are kept with the floor in them; a region whose floor lease lapsed admits what is beyond it.
  const grant = floorOff ? Math.max(0, rolled.grant - floor) : rolled.grant;
  let allowed = true;
  let retryAfterMs = 0;
  let write = false;
  if (operation === 'refund') {
    rolled.count = Math.max(0, rolled.count - cost);
    write = true;
  } else if (usedTimesWindow(rolled, index, now, windowMs, sliding) + cost * windowMs > grant * windowMs) {
    allowed = false;
    retryAfterMs = untilEnd;
    write = operation === 'limit' && !rolled.current;
  } else if (operation === 'limit') {
    rolled.count += cost;
    write = true;
  }
  const ttlMs = write ? keepFor(index, windowMs, now) : -1;
  const room = grant * windowMs - usedTimesWindow(rolled, index, now, windowMs, sliding);
  return {
    allowed,
    remaining: room <= 0 ? 0 : Math.floor(room / windowMs),
    resetMs: rolled.count > 0 || (sliding && rolled.previous > 0) ? untilEnd : 0,
    retryAfterMs,
    state: write ? written(stored, index, rolled, sliding) : stored,
    ttlMs,
  };
}

/**
 * Writes what the ledger granted this region for window `target` (its total, floor included): the
 * current window's grant or the next one's, only ever raised. A grant for the current window that
 * finds no state of it or of the window before (the region's store lost it: a region asks only for
 * identifiers it decided for in the window) counts as used: what was granted before may have been
 * admitted. Answers the current window's count as `remaining` and its grant as `resetMs`.
 */
export const grantBudgetWindow: WorkerWrite = (stored, now, amount, target, windowMs, sliding = false) => {
  const { index, rolled } = rolledAt(stored, now, windowMs);
  if (target === index) {
    rolled.grant = Math.max(rolled.grant, amount);
    if (stored === undefined || stored.index < index - 1) rolled.count = rolled.grant;
  } else if (target === index + 1) {
    rolled.next = Math.max(rolled.next, amount);
  } else {
    return answered(rolled.count, rolled.grant, stored, -1);
  }
  return rewritten(stored, index, rolled, rolled.count, windowMs, now, sliding);
};

/**
 * Tells the region's store what the ledger had granted it for window `target` before (`amount`,
 * floor included), once per process and identifier: a store that holds less lost what it was
 * granted (a restart without persistence), and what it may have admitted of it counts as used. A
 * store that holds as much is unchanged. Answers the count as `remaining`, the grant as `resetMs`.
 */
export const syncBudgetWindow: WorkerWrite = (stored, now, amount, target, windowMs, sliding = false) => {
  const { index, rolled } = rolledAt(stored, now, windowMs);
  if (target !== index || rolled.grant >= amount) {
    return answered(rolled.count, rolled.grant, stored, -1);
  }
  rolled.count += amount - rolled.grant;
  rolled.grant = amount;
  return rewritten(stored, index, rolled, rolled.count, windowMs, now, sliding);
};

/**
 * A sliding window's release for the window before the current one gives nothing back (no unit can
 * be admitted there any more): it answers what the region admitted there, as `resetMs`, with
 * `remaining` 1 when that is known and 0 when not. Known from a state of that window, or from one
 * rolled out of it with a count (a state recreated after a loss has none, and says nothing).
 */
function admittedBefore(
  stored: BudgetWindowState | undefined,
  index: number,
  rolled: Rolled,
): Outcome<BudgetWindowState> {
  const known =
    stored !== undefined && (stored.index === index - 1 || (stored.index === index && rolled.previous > 0));
  return answered(known ? 1 : 0, known ? rolled.previous : 0, stored, -1);
}

/**
 * Gives back up to `amount` units of the grant of window `target` that the region will not use: the
 * grant is lowered first, here, never below what was admitted (for a sliding window, below the
 * region's estimate now, which only falls from here), so that the ledger may grant them to another
 * region. Answers the units given back as `remaining`, and the grant left as `resetMs`.
 */
export const releaseBudgetWindow: WorkerWrite = (stored, now, amount, target, windowMs, sliding = false) => {
  const { index, rolled } = rolledAt(stored, now, windowMs);
  if (sliding && target === index - 1) return admittedBefore(stored, index, rolled);
  const used = Math.ceil(usedTimesWindow(rolled, index, now, windowMs, sliding) / windowMs);
  const given =
    stored === undefined || stored.index < index - 1 || target !== index
      ? 0
      : Math.min(amount, Math.max(0, rolled.grant - used));
  if (given === 0) {
    return answered(0, rolled.grant, stored, -1);
  }
  rolled.grant -= given;
  return rewritten(stored, index, rolled, given, windowMs, now, sliding);
};

/**
 * The policy a region decides a window budget with: the global policy's limit and window (for
 * headers and `maxCost`), deciding against the region's grant, `floor` when nothing more was granted.
 * With `floorOff` (the region does not hold its floor's lease), against the grant less the floor:
 * the script takes it as a negative floor (the sign is the one place left for it).
 */
export function budgetWindowPolicy(
  global: Policy,
  floor: number,
  description: string,
  sliding = false,
  floorOff = false,
): Policy<BudgetWindowState> {
  const windowMs = global.windowMs;
  const off = floorOff && floor > 0;
  return {
    algorithm: global.algorithm,
    rule: { name: 'budget-window', parameters: [off ? -floor : floor, windowParameter(windowMs, sliding)] },
    limit: global.limit,
    windowMs,
    maxCost: global.maxCost,
    description,
    decide: (state, now, operation, cost) =>
      decideBudgetWindow(state, now, operation, cost, floor, windowMs, sliding, off),
  };
}

/** A policy whose `limit` call is one of the worker's writes to window `target` (the cost is its amount). */
function writePolicy(
  algorithm: string,
  script: 'budget-window-sync' | 'budget-window-release' | 'budget-window-grant',
  target: number,
  windowMs: number,
  write: WorkerWrite,
  sliding: boolean,
): Policy<BudgetWindowState> {
  return {
    algorithm,
    rule: { name: script, parameters: [target, windowParameter(windowMs, sliding)] },
    limit: Number.MAX_SAFE_INTEGER,
    windowMs,
    maxCost: Number.MAX_SAFE_INTEGER,
    description: `${algorithm}(window=${target})`,
    decide: (state, now, _operation, amount) => write(state, now, amount, target, windowMs, sliding),
  };
}

/** The policy whose `limit` call tells what the ledger granted for window `target` before (the cost: see syncBudgetWindow). */
export function budgetSyncPolicy(
  target: number,
  windowMs: number,
  sliding = false,
): Policy<BudgetWindowState> {
  return writePolicy('budgetSync', 'budget-window-sync', target, windowMs, syncBudgetWindow, sliding);
}

/** The policy whose `limit` call gives back units of window `target`'s grant (the cost is how many at most). */
export function budgetReleasePolicy(
  target: number,
  windowMs: number,
  sliding = false,
): Policy<BudgetWindowState> {
  return writePolicy(
    'budgetRelease',
    'budget-window-release',
    target,
    windowMs,
    releaseBudgetWindow,
    sliding,
  );
}

/** The policy whose `limit` call writes a grant for window `target` (the cost is the granted total). */
export function budgetGrantPolicy(
  target: number,
  windowMs: number,
  sliding = false,
): Policy<BudgetWindowState> {
  return writePolicy('budgetGrant', 'budget-window-grant', target, windowMs, grantBudgetWindow, sliding);
}
