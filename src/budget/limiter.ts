// A limiter with a global budget: a pipeline deciding against the region's store, and the worker that keeps what the region holds.
import { Pipeline, RateLimiter } from '../core/index.js';
import type { SluiceError } from '../errors.js';
import { callHook } from '../hooks.js';
import type { ResolvedLimiterOptions } from '../options.js';
import type { Limiter, Policy } from '../types.js';
import { BucketWorker } from './bucket-worker.js';
import { ledgerIn } from './ledger.js';
import type { BudgetConfig } from './options.js';
import type { BudgetView } from './view.js';
import { WindowWorker } from './window-worker.js';
import type { RegionWorker, WorkerParts } from './worker.js';

/** A limiter whose limit several regions share (made by createLimiter with `budget`). */
export interface BudgetLimiter extends Limiter {
  /** What this region holds and asks for the limiter, as this process sees it. */
  budget(): BudgetView;
  /**
   * Stops the background worker. Its timers do not keep a process alive; close it when the limiter
   * is dropped before the process ends (tests, reloads).
   */
  close(): void;
}

/**
 * A region's scripts know `limit`, `peek` and `refund`: a charge (or a reservation, settled by one)
 * would take units no grant covers, so the region's policy refuses both (`Policy.refuses`), and the
 * operations check that before anything is written.
 */
function notShared(operation: 'charge' | 'reserve'): string {
  return `Expected a limiter without \`budget\` for \`${operation}()\`, got one whose limit regions share: a region holds only what the ledger granted it, which a charge could pass.`;
}

/** The region's policy, refusing what a region cannot honour. */
function regionPolicy(policy: Policy): Policy {
  return { ...policy, refuses: { charge: notShared('charge'), reserve: notShared('reserve') } };
}

class BudgetedLimiter extends RateLimiter implements BudgetLimiter {
  readonly budget: () => BudgetView;
  readonly close: () => void;

  constructor(pipeline: Pipeline, worker: RegionWorker) {
    super(pipeline);
    this.budget = () => worker.view();
    this.close = () => worker.close();
  }
}

/**
 * The limiter of one region: its pipeline decides every call against the region's store alone, on
 * that store's clock as any limiter does (the policy becomes the region's part of the budget); its
 * worker watches the decisions and talks to the ledger in the background, on this process's clock.
 */
export function budgetedLimiter(options: ResolvedLimiterOptions, config: BudgetConfig): BudgetLimiter {
  const clock = options.clock ?? Date.now;
  const { name, onError, metrics, enforce } = options;
  const parts: WorkerParts = {
    name,
    config,
    store: options.store,
    ledger: ledgerIn(config.global),
    clock,
    storeClock: options.clock === undefined,
    report: (error: SluiceError, identifier, source) => {
      if (onError === undefined) return;
      const context = {
        name,
        identifier,
        operation: 'limit',
        cost: 0,
        source,
        storeMs: 0,
        enforced: enforce,
      } as const;
      callHook('onError', onError, error, { ...context, error });
    },
  };
  const worker: RegionWorker =
    config.kind === 'bucket'
      ? new BucketWorker(parts, options.policy)
      : new WindowWorker(parts, options.policy);
  const pipeline = new Pipeline({ ...options, policy: regionPolicy(worker.policy) });
  const floorOff = worker.floorOff;
  if (floorOff !== undefined) {
    // Each call is decided with the floor or without it, as this process's lease on it stands then.
    const on = pipeline.policy;
    const off = regionPolicy(floorOff.policy);
    pipeline.choosePolicy(() => (floorOff.holds() ? on : off));
  }
  // An observer, not a recorder: the worker sees every decision and the fast path stays on.
  pipeline.observe((decision, call, source) => worker.count(decision, call, source));
  metrics?.budget?.(name, () => worker.view());
  worker.start();
  return new BudgetedLimiter(pipeline, worker);
}
