// What an operation module declares: the one shape every layer reads an operation by.
import type { SluiceError } from '../errors.js';
import type { Decision, Operation, Policy } from '../types.js';

/** The operations of the registry: the decisions (see {@link Operation}) and `reset`, which forgets. */
export type OperationName = Operation | 'reset';

/** What a request and its result carry beyond a decision: operands sent, fields received. */
export interface RecordShape {
  readonly operands: number;
  readonly fields: number;
  /**
   * The shape as the scripts read it (ARGV[1] of lua/single.lua): `<code>:<operands>:<fields>`, so
   * that a new operation needs no table of the scripts to learn it.
   */
  readonly wire: string;
}

/** An operation's code and shape on the wire (see {@link RecordShape.wire}). */
export function wire(
  code: string,
  operands: number,
  fields: number,
): { readonly code: string } & RecordShape {
  return { code, operands, fields, wire: `${code}:${operands}:${fields}` };
}

/**
 * What a call of an operation counts in metrics (src/metrics/tally.ts reads it; no layer of the
 * metrics names an operation). Every call the store decides counts in the store time histogram, and
 * every decision of a lease policy in its slots, whatever this says.
 */
export interface OperationCounts {
  /**
   * Whether it is a decision: counted by outcome (`sluice_decisions_total`: allowed, denied,
   * shadow_denied), in near-limit calls, the deny cache's and the failure policy's answers, the
   * stored denials, and the most-denied identifiers.
   */
  readonly decisions: boolean;
  /**
   * What it adds to `sluice_units_total`: what it asked (`cost`, allowed or not), what its decision
   * says it took (`granted`), or nothing (`none`).
   */
  readonly units: 'cost' | 'granted' | 'none';
  /**
   * Whether it is a charge: `sluice_charges_total`, the units it took (its amount less what
   * `maxDebt` cut off: the decision's `cutOff`) and the units cut off.
   */
  readonly charges: boolean;
}

/** What `limit` and the other calls that ask for units count: a decision, with the units asked. */
export const COUNTS_DECISION: OperationCounts = { decisions: true, units: 'cost', charges: false };
/** What an operation that asks for nothing counts: the store's time only. */
export const COUNTS_NOTHING: OperationCounts = { decisions: false, units: 'none', charges: false };

/**
 * What one operation is, for every layer that handles it: the scripts (its code), the stores (its
 * extra arguments and result fields), the pipeline (validation, deny cache, failure, refunds) and
 * the metrics (what it counts).
 * Each operation is one module of src/operations/ that exports its entry; see docs/contributing.md.
 */
export interface OperationEntry extends RecordShape {
  /** The code the scripts read as `op` (ARGV[1]); `undefined` when no script runs (`reset` is a DEL). */
  readonly code: string | undefined;
  /** The option that names the operation's amount in error messages: `cost`, `amount`, `n`. */
  readonly amountOption: 'cost' | 'amount' | 'n';
  /** Checks the amount against the policy; the error names `amountOption`. */
  readonly checkAmount: (option: string, amount: unknown, policy: Policy) => SluiceError | undefined;
  /**
   * Whether a granted call took units, where the store (or the fallback store) decided it: what a
   * refused group gives back, with {@link OperationEntry.undo}.
   */
  readonly takes: boolean;
  /** The operation that gives back what this one took (a refused group, the middleware's count modes). */
  readonly undo: Operation | undefined;
  /**
   * When what gives back a decision depends on it (a lease's acquisition: its release when it holds
   * a lease, else `undo`'s): that operation. Absent: `undo`.
   */
  readonly undoOf?: (decision: Decision) => Operation | undefined;
  /**
   * The deny cache: `lookup`, a remembered denial answers and a new denial is remembered; `forget`,
   * what is remembered of the identifier is dropped first (it may be granted more); `none`.
   */
  readonly denyCache: 'lookup' | 'forget' | 'none';
  /**
   * With `lookup`: the cost the deny cache looks a call up at and remembers its refusal at, from the call's amount:
   * the fewest units the call could be granted. Absent: the amount (a `limit` of 5 needs all 5). A denial remembered
   * at cost c answers only calls at c or more, so an operation that needs less than its amount says so here.
   */
  readonly denyCost?: (amount: number) => number;
  /**
   * Whether a denial an operator stored for the identifier (`limiter.deny()`) refuses the call: the
   * operations that ask for units.
   */
  readonly readsDenial: boolean;
  /**
   * A store that fails or runs out of time: `policy`, the limiter's `onStoreError` answers (a
   * decision with a `reason`); `reject`, the call rejects with the error.
   */
  readonly onStoreFailure: 'policy' | 'reject';
  /** What a call counts in metrics (see {@link OperationCounts}). */
  readonly counts: OperationCounts;
  /** Whether the operation may be decided with others by one script (an atomic all()). */
  readonly atomic: boolean;
  /** The request's `operands` for a call under `policy` (as many as `operands`); absent when there are none. */
  readonly operandsOf?: (policy: Policy) => readonly string[];
  /**
   * The decision a result with `fields` makes, from the decision of its first four and the
   * request's `operands` (a lease's id); absent when there are none.
   */
  readonly answer?: (decision: Decision, fields: readonly number[], operands: readonly string[]) => Decision;
  /**
   * The operation a lease policy (`concurrency()`) runs in its place: `limit`'s is a lease's
   * acquisition (see leases.ts, ACQUIRE). Absent: the operation itself.
   */
  readonly underLease?: OperationEntry;
  /**
   * The decision when the store did not answer (the failure policy's `open` or `closed`, the deny
   * cache), completed with what the operation's answer always carries; `amount` is the call's.
   * Absent: the decision as it is.
   */
  readonly unanswered?: (decision: Decision, amount: number) => Decision;
  /**
   * In shadow mode (`enforce: false`), what the caller gets: `shadowed` is the decision made
   * allowed, with `wouldAllow`. Absent: `shadowed` (with the decision's `reason`).
   */
  readonly shadow?: (decision: Decision, shadowed: Decision) => Decision;
}

/** What most decisions share: units checked, the failure policy answers, no operands, no fields. */
export const DECISION = { onStoreFailure: 'policy', operands: 0, fields: 0, readsDenial: false } as const;
