// The in-process contenders: each sluice algorithm on a MemoryStore, RateLimiterMemory, and the floor
// (the least a fixed window in a Map can do), each run in a process of its own (bench/worker.ts).
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { createLimiter, type Decision, MemoryStore } from '../src/index.js';
import { type Contender, LIMIT, rlfDecider, SLUICE_POLICIES, WINDOW_MS } from './contenders.js';
import type { Decider } from './load.js';

export const MAP_FLOOR = 'floor.memory.fixedWindow';
export const RLF_MEMORY = 'rlf.RateLimiterMemory';
export const SLUICE_MEMORY_FIXED_WINDOW = 'sluice.memory.fixedWindow';

/** What the in-process contenders are built with: how many identifiers a store may hold. */
export interface MemoryContenderOptions {
  /** MemoryStore's `maxKeys` (the store's default when absent). */
  readonly maxKeys?: number;
}

/** One identifier's window in the floor's Map. */
interface FloorWindow {
  index: number;
  count: number;
}

/**
 * The floor: a fixed window of LIMIT per WINDOW_MS in one Map, answering the same decision fields as
 * sluice (allowed, limit, remaining, resetMs, retryAfterMs) through a promise, with nothing else: no
 * validation, no expiry or bound on the identifiers kept, no eviction, no hooks.
 */
export function mapFloor(limit = LIMIT, windowMs = WINDOW_MS): Decider<Decision> {
  const windows = new Map<string, FloorWindow>();
  return {
    decide(identifier) {
      const now = Date.now();
      const index = Math.floor(now / windowMs);
      const untilEnd = (index + 1) * windowMs - now;
      let window = windows.get(identifier);
      if (window === undefined) {
        window = { index, count: 0 };
        windows.set(identifier, window);
      } else if (window.index !== index) {
        window.index = index;
        window.count = 0;
      }
      const allowed = window.count < limit;
      if (allowed) window.count++;
      return Promise.resolve({
        allowed,
        limit,
        remaining: limit - window.count,
        resetMs: untilEnd,
        retryAfterMs: allowed ? 0 : untilEnd,
      });
    },
    allowed: (decision) => decision.allowed,
  };
}

/** The in-process stores: the floor, each sluice algorithm on a MemoryStore, and RateLimiterMemory. */
export function memoryContenders(options: MemoryContenderOptions = {}): Contender[] {
  const storeOptions = options.maxKeys === undefined ? {} : { maxKeys: options.maxKeys };
  const sluice: Contender[] = SLUICE_POLICIES.map((policy) => ({
    id: `sluice.memory.${policy.label}`,
    library: 'sluice',
    label: policy.label,
    kind: policy.kind,
    setup() {
      const limiter = createLimiter({
        store: new MemoryStore(storeOptions),
        policy: policy.make(),
        name: 'bench',
      });
      return {
        decide: (identifier: string) => limiter.limit(identifier),
        allowed: (decision: Decision) => decision.allowed,
      } as Decider;
    },
  }));
  return [
    {
      id: MAP_FLOOR,
      library: 'floor',
      label: 'Map fixed window (floor)',
      kind: 'fixed-window',
      setup: () => mapFloor() as Decider,
    },
    ...sluice,
    {
      id: RLF_MEMORY,
      library: 'rate-limiter-flexible',
      label: 'RateLimiterMemory',
      kind: 'fixed-window',
      setup() {
        const limiter = new RateLimiterMemory({ points: LIMIT, duration: WINDOW_MS / 1000 });
        return rlfDecider((identifier) => limiter.consume(identifier));
      },
    },
  ];
}
