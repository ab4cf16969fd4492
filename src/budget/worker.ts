// A region's background worker: watches this process's decisions, asks the ledger in batches off the request path, writes what it grants into the region's store.
import { performance } from 'node:perf_hooks';
import { storeError } from '../core/index.js';
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { CountedCall, DecisionSource } from '../hooks.js';
import type { Decision, Policy, Store, StoreRequest, StoreResult } from '../types.js';
import type { Ledger } from './ledger.js';
import type { BudgetConfig } from './options.js';
import type { BudgetView } from './view.js';

/** What a process keeps of one identifier it has decided for. */
export interface Tracked {
  readonly identifier: string;
  /** The hash tag its calls named, if any: part of its keys, in the region's store and the ledger. */
  readonly tag: string | undefined;
  /** Units asked of this process since it last told the ledger. */
  unreported: number;
  /** When this process last decided for it, on the limiter's clock. */
  seenAt: number;
  /** A ledger call for it is under way. */
  inFlight: boolean;
}

/** What a worker needs from the limiter that owns it. */
export interface WorkerParts {
  readonly name: string;
  readonly config: BudgetConfig;
  /** The region's store, where decisions are made and grants written. */
  readonly store: Store;
  readonly ledger: Ledger;
  /** The limiter's clock, or this process's: when the worker asks, and when leases end. */
  readonly clock: () => number;
  /**
   * Whether the region's store decides on its own clock (no limiter clock was given): its writes
   * then leave the time to the store too, so that windows are the store's, whoever writes.
   */
  readonly storeClock: boolean;
  /** Reports a failed ledger call or write (to `onError`), with an identifier it concerned. */
  readonly report: (error: SluiceError, identifier: string, source: 'store-error' | 'timeout') => void;
}

/** A worker as its limiter holds it. */
export interface RegionWorker {
  /** The policy the region's store decides with. */
  readonly policy: Policy;
  /**
   * For a region that holds its floor as a lease (windows): the policy it decides with while this
   * process does not hold it (its grants less the floor), and whether it holds it now.
   */
  readonly floorOff?: { readonly policy: Policy; holds(): boolean };
  /** Hears each decision of the limiter (its DecisionObserver). */
  count(decision: Decision, call: CountedCall, source: DecisionSource): void;
  start(): void;
  close(): void;
  view(): BudgetView;
}

/** How long urgent asks wait to be sent together: calls of one tick, and a little more. */
const GATHER_MS = 2;
/** The first guess of a ledger call's duration, before one was measured. */
const FIRST_RTT_MS = 100;
/**
 * After a failed ledger call the worker waits before the next, doubling from the first to the
 * longest wait (at most a quarter of a window or lease): a region cut off asks a few times a
 * second at most, and reports each failure.
 */
const FIRST_BACKOFF_MS = 50;
const LONGEST_BACKOFF_MS = 2000;

/**
 * The machinery every budget kind shares: the records of identifiers (bounded, idle ones dropped),
 * the urgent asks gathered into one ledger call, the scheduled passes, the call's deadline, and
 * what is reported. A kind says what it asks (`exchange`), when (`nextPass`, `due`, `observe`), and
 * what it holds (`held`). Its timers are unref'd: a process exits without closing it.
 */
export abstract class Worker<T extends Tracked> implements RegionWorker {
  readonly parts: WorkerParts;
  readonly #records = new Map<string, T>();
  readonly #urgent = new Set<T>();
  #gatherTimer: NodeJS.Timeout | undefined;
  #passTimer: NodeJS.Timeout | undefined;
  #closed = false;
  #calls = 0;
  #entries = 0;
  #errors = 0;
  #up = true;
  /** Failed ledger calls in a row, and until when (on the clock) no other is made. */
  #failures = 0;
  #quietUntil = 0;
  /** Identifiers not tracked because the bound was reached (they get the floor). */
  untracked = 0;
  /** A moving average of ledger calls' durations, in ms. */
  rttMs = FIRST_RTT_MS;

  constructor(parts: WorkerParts) {
    this.parts = parts;
  }

  /** The policy the region's store decides with. */
  abstract readonly policy: Policy;
  /** See RegionWorker.floorOff. */
  readonly floorOff?: { readonly policy: Policy; holds(): boolean };
  /** A new record for an identifier (and tag) seen for the first time. */
  protected abstract track(identifier: string, tag: string | undefined, now: number): T;
  /** Notes a decision; true when the identifier needs the ledger soon (its allowance runs low). */
  protected abstract observe(
    record: T,
    cost: number,
    decision: Decision,
    now: number,
    fromStore: boolean,
  ): boolean;
  /** When the next scheduled pass is due, on the clock. */
  protected abstract nextPass(now: number): number;
  /** Whether a scheduled pass asks for this identifier. */
  protected abstract due(record: T, now: number): boolean;
  /** Whether to forget this identifier (no calls for long enough: it holds nothing any more). */
  protected abstract idle(record: T, now: number): boolean;
  /** Asks the ledger for these identifiers and writes what it granted into the region's store. */
  protected abstract exchange(records: readonly T[], sentAt: number): Promise<void>;
  /** Units held beyond the floors and units asked, summed over identifiers (see BudgetView). */
  protected abstract held(records: Iterable<T>, now: number): { granted: number; demand: number };

  /** Starts the scheduled passes. */
  start(): void {
    this.#schedule();
  }

  /** Stops the timers; calls under way finish, and write nothing more. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#gatherTimer);
    clearTimeout(this.#passTimer);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The limiter's DecisionObserver: every decision passes here, before the caller gets it. */
  count(decision: Decision, call: CountedCall, source: DecisionSource): void {
    if (call.operation !== 'limit' || this.#closed) return;
    const now = this.parts.clock();
    const tag = call.tag;
    // Tagged keys start with a digit, untagged ones with a NUL: the two never meet.
    const key = tag === undefined ? `\u0000${call.identifier}` : `${tag.length}:${tag}${call.identifier}`;
    let record = this.#records.get(key);
    if (record === undefined) {
      if (this.#records.size >= this.parts.config.maxIdentifiers) {
        this.untracked++;
        return;
      }
      record = this.track(call.identifier, tag, now);
      this.#records.set(key, record);
    }
    record.seenAt = now;
    if (this.observe(record, call.cost, decision, now, source === 'store') && !record.inFlight) {
      this.#urgent.add(record);
      this.#gatherTimer ??= unref(setTimeout(this.#gather, Math.max(GATHER_MS, this.#quietUntil - now)));
    }
  }

  /** What the region holds and asks, as this process sees it. */
  view(): BudgetView {
    const { config, name } = this.parts;
    const { granted, demand } = this.held(this.#records.values(), this.parts.clock());
    return {
      name,
      region: config.region,
      regions: config.regions,
      kind: config.kind,
      identifiers: this.#records.size,
      granted,
      demand,
      ledgerCalls: this.#calls,
      ledgerEntries: this.#entries,
      ledgerErrors: this.#errors,
      ledgerMs: Math.round(this.rttMs * 10) / 10,
      ledgerUp: this.#up,
      floorHeld: this.floorOff?.holds() ?? true,
    };
  }

  /** A write of `policy` for a record to the region's store, `amount` as its cost (see write). */
  protected request(policy: Policy, record: Tracked, amount: number): StoreRequest {
    const { name, clock, storeClock } = this.parts;
    return {
      policy,
      name,
      identifier: record.identifier,
      tag: record.tag,
      operation: 'limit',
      cost: amount,
      now: storeClock ? undefined : clock(),
    };
  }

  /** The ledger's key of a record. */
  protected ledgerKey(record: Tracked): string {
    return this.parts.ledger.keyFor(this.parts.name, record.identifier, record.tag);
  }

  /**
   * Writes to the region's store (grants, leases, releases); each request's result, or undefined
   * when it failed (reported: the region then holds less).
   */
  protected write(requests: readonly StoreRequest[]): Promise<Array<StoreResult | undefined>> {
    if (this.#closed) return Promise.resolve(requests.map(() => undefined));
    const store = this.parts.store;
    return Promise.all(
      requests.map((request) =>
        store.decide(request).then(
          (result) => result,
          (error: unknown) => {
            this.parts.report(storeError(store.kind, error), request.identifier, 'store-error');
            return undefined;
          },
        ),
      ),
    );
  }

  readonly #gather = (): void => {
    this.#gatherTimer = undefined;
    const now = this.parts.clock();
    if (now < this.#quietUntil) {
      this.#gatherTimer = unref(setTimeout(this.#gather, this.#quietUntil - now));
      return;
    }
    const records = [...this.#urgent].filter((record) => !record.inFlight);
    this.#urgent.clear();
    if (records.length > 0) this.#dispatch(records);
  };

  readonly #pass = (): void => {
    this.#passTimer = undefined;
    if (this.#closed) return;
    const now = this.parts.clock();
    const due: T[] = [];
    for (const [key, record] of this.#records) {
      if (record.inFlight) continue;
      if (this.idle(record, now)) this.#records.delete(key);
      else if (this.due(record, now)) due.push(record);
    }
    if (due.length > 0 && now >= this.#quietUntil) this.#dispatch(due);
    this.#schedule();
  };

  #schedule(): void {
    if (this.#closed) return;
    const now = this.parts.clock();
    this.#passTimer = unref(setTimeout(this.#pass, Math.max(1, this.nextPass(now) - now)));
  }

  /** One ledger exchange for these records, within the deadline; a later reply is still used. */
  #dispatch(records: T[]): void {
    if (this.#closed) return;
    for (const record of records) record.inFlight = true;
    const started = performance.now();
    const sentAt = this.parts.clock();
    const identifier = (records[0] as T).identifier;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'late'>((resolve) => {
      timer = unref(setTimeout(() => resolve('late'), this.parts.config.ledgerTimeoutMs));
    });
    this.#calls++;
    this.#entries += records.length;
    const exchange = this.exchange(records, sentAt).then(
      () => {
        this.#up = true;
        this.#failures = 0;
        this.#quietUntil = 0;
        this.rttMs += (performance.now() - started - this.rttMs) / 4;
      },
      (error: unknown) => this.#failed(storeError('global', error), identifier, 'store-error'),
    );
    Promise.race([exchange.then(() => 'done' as const), deadline]).then((outcome) => {
      clearTimeout(timer);
      for (const record of records) record.inFlight = false;
      if (outcome === 'late') {
        this.#failed(lateError(this.parts.config.ledgerTimeoutMs), identifier, 'timeout');
      }
    });
  }

  #failed(error: SluiceError, identifier: string, source: 'store-error' | 'timeout'): void {
    this.#errors++;
    this.#up = false;
    this.#failures++;
    const { kind, windowMs, leaseMs } = this.parts.config;
    const longest = Math.min(
      LONGEST_BACKOFF_MS,
      Math.max(FIRST_BACKOFF_MS, (kind === 'bucket' ? leaseMs : windowMs) / 4),
    );
    const wait = Math.min(longest, FIRST_BACKOFF_MS * 2 ** (this.#failures - 1));
    this.#quietUntil = this.parts.clock() + wait;
    this.parts.report(error, identifier, source);
  }
}

function unref(timer: NodeJS.Timeout): NodeJS.Timeout {
  timer.unref();
  return timer;
}

function lateError(timeoutMs: number): SluiceError {
  return new SluiceError(
    ERROR_CODES.TIMEOUT,
    `The global store did not answer a budget's ledger call within ${timeoutMs} ms (budget.ledgerTimeoutMs): the region decides on what it holds meanwhile.`,
  );
}
