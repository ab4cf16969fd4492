// One call on its way through the pipeline: plain data the pipeline fills and the store reads.
import { withFields } from '../copy.js';
import type { SluiceError } from '../errors.js';
import { entryOf, OPERATIONS } from '../operations.js';
import type { Decision, Operation, Policy, StoreRequest, StoreResult } from '../types.js';
import type { Expiring } from './deadlines.js';

const unanswered = (): void => {};

/** A call the core keeps after its decision (a slot, a reservation, a group's grant), for a follow-up. */
export interface KeptCall {
  readonly call: Call;
  readonly decision: Decision;
}

/** What a caller of the core gives a call besides its operation, identifier, amount and parts. */
export interface EntryOptions {
  /** The operands the caller made and checked (a lease to release, a slot's wait), or why they are refused. */
  readonly operands?: readonly string[] | SluiceError | undefined;
  /** Receives the call once it is made, for a holder that acts on it later (see KeptCall). */
  readonly hold?: { call: Call | undefined } | undefined;
  /**
   * A follow-up of what an earlier call took (a give-back, a renewal, a settle's refund or charge):
   * decided under that call's policy, identifier and tag, where it was taken (in the fallback store
   * when the fallback decided it).
   */
  readonly after?: KeptCall | undefined;
}

/**
 * A request to one limiter's store, with what the pipeline learns on the way. It is at once the
 * store's request and the deadline's entry, so a decision allocates one object of its own; a
 * limiter's in-process decisions reuse one (see Pipeline.call). It holds no reference to the
 * limiter: the store answers the pipeline that submitted it, which finds its way back by `resolve`.
 */
// Fields with initializers, not assigned in a method the constructor calls: V8 sizes the object by
// what the class declares and its constructor assigns, and puts the rest out of line (measured:
// 157 bytes more per Redis decision, 64 at a time, Node.js 20 and 26).
export class Call implements StoreRequest, Expiring {
  /** The limiter's policy, or its variant for this call's `limit`. */
  policy: Policy;
  readonly name: string;
  identifier: string;
  tag: string | undefined;
  operation: Operation;
  cost: number;
  now: number | undefined;
  /** An operation's own arguments (see OperationEntry.operands); undefined for limit, peek and refund. */
  operands: readonly string[] | undefined;
  /** What the store reads that operators stored for the identifier (StoreRequest.storedReads). */
  storedReads = 0;
  /** When the call started, in the deny cache's time: the limiter's clock, or `performance.now()`. */
  startedAt = 0;
  /** The deny cache's epoch when the call started (see DenyCache.epoch). */
  epoch = 0;
  /** How many store outages had begun when the call was sent (see Health.answered). */
  outagesSeen = 0;
  /** `performance.now()` when the store was asked, for `storeMs`; NaN when not timed. */
  askedAt = 0;
  /** The shard that decides the call; looked up only while some shard fails, or when it fails. */
  shard: string | undefined = undefined;
  /** This call is its shard's probe after a failure (see Health.admit). */
  probe = false;
  /** The store failure behind a decision of the failure policy. */
  error: SluiceError | undefined = undefined;
  deadline = 0;
  settled = false;
  /** Where the decision goes once the store answers, fails or runs out of time. */
  resolve: (decision: Decision) => void = unanswered;
  /** Where the store's error goes, for an operation whose store failure rejects (OperationEntry.onStoreFailure). */
  reject: (error: SluiceError) => void = unanswered;

  constructor(
    name: string,
    policy: Policy,
    operation: Operation,
    identifier: string,
    cost: number,
    tag: string | undefined,
  ) {
    this.name = name;
    this.policy = policy;
    this.operation = operation;
    this.identifier = identifier;
    this.cost = cost;
    this.tag = tag;
    this.now = undefined;
    // The operands a call of the operation carries by default (OperationEntry.operandsOf): a lease
    // policy's acquisition, its new lease's id.
    const entry = policy.leaseMs === undefined ? OPERATIONS[operation] : entryOf(operation, policy);
    const of = entry.operandsOf;
    this.operands = of === undefined ? undefined : of(policy);
  }

  /** Makes a finished call a new one (a limiter's in-process decisions reuse one object). */
  renew(
    policy: Policy,
    operation: Operation,
    identifier: string,
    cost: number,
    tag: string | undefined,
  ): this {
    this.policy = policy;
    this.operation = operation;
    this.identifier = identifier;
    this.cost = cost;
    this.tag = tag;
    this.now = undefined;
    // The operands a call of the operation carries by default (OperationEntry.operandsOf): a lease
    // policy's acquisition, its new lease's id.
    const entry = policy.leaseMs === undefined ? OPERATIONS[operation] : entryOf(operation, policy);
    const of = entry.operandsOf;
    this.operands = of === undefined ? undefined : of(policy);
    this.startedAt = 0;
    this.epoch = 0;
    this.outagesSeen = 0;
    this.askedAt = 0;
    this.shard = undefined;
    this.probe = false;
    this.error = undefined;
    this.storedReads = 0;
    return this;
  }
}

/** The decision a store's result makes for a request, under its policy's `limit`, with what its fields say. */
export function decisionOf(result: StoreResult, request: StoreRequest): Decision {
  const decision: Decision = {
    allowed: result.allowed,
    limit: request.policy.limit,
    remaining: result.remaining,
    resetMs: result.resetMs,
    retryAfterMs: result.retryAfterMs,
  };
  if (result.stored === -1) return withFields(decision, { reason: 'denied' as const });
  const fields = result.fields;
  if (fields === undefined) return decision;
  // The operation makes its answer from its fields (a charge's debt, a lease's acquisition).
  const { operation, policy } = request;
  const answer = (policy.leaseMs === undefined ? OPERATIONS[operation] : entryOf(operation, policy)).answer;
  return answer === undefined ? decision : answer(decision, fields, request.operands ?? []);
}
